package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/testutil"
)

// felixCLI builds tools/felix and returns a runner for it that
// sees only the dev directory: no FELIX_TOKEN, no token flag unless given.
func felixCLI(t *testing.T, devDir string) func(args ...string) (int, string, string) {
	bin := testutil.GoBuild(t, "github.com/felixmq/felix/tools/felix")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, devdir.TokenEnv+"=") && !strings.HasPrefix(kv, devdir.DirEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, devdir.DirEnv+"="+devDir)
	return func(args ...string) (int, string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return code, stdout.String(), stderr.String()
	}
}

// TestMakeRunEmbeddedControlPlane is `make run` as the README tells it,
// on the real binaries: the broker with its defaults starts its embedded
// control plane and writes a real Felix token (mode 0600) and the control
// plane's URL next to its certificate; the CLI with no token flag
// publishes and subscribes with that token; a garbage token is refused by
// the verifier that checks the control plane's tenant keys (the dev
// verifier would take it); `felix admin` reaches the control plane with no
// flags, and a stream created there is served by the broker.
func TestMakeRunEmbeddedControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the felix CLI and runs a broker process")
	}
	bp := startBrokerProcess(t, "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0")
	dir := filepath.Dir(bp.cert)
	fi, err := os.Stat(filepath.Join(dir, devdir.TokenFile))
	require.NoError(t, err, "the token file is written before the broker is ready")
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	tok, err := os.ReadFile(filepath.Join(dir, devdir.TokenFile))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(tok), "."), "a JWS: %q", tok)
	felix := felixCLI(t, dir)

	code, _, stderr := felix("pub", "--addr", bp.addr, "--ack", "--count", "2", "hello")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "published 2 messages")
	code, out, stderr := felix("sub", "--addr", bp.addr, "--from", "earliest", "--count", "2")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "0 0 hello\n0 1 hello\n", out)

	code, _, stderr = felix("pub", "--addr", bp.addr, "--token", "garbage", "--ack", "x")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "auth")
	require.Contains(t, stderr, "malformed")

	// The start-up stream and cache are in the control plane's catalog.
	code, out, stderr = felix("admin", "stream", "list", "--tenant", "t1", "--namespace", "default")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"demo"`)
	code, out, stderr = felix("admin", "cache", "list", "--tenant", "t1", "--namespace", "default")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"demo"`)

	code, out, stderr = felix("admin", "stream", "create", "orders", "--tenant", "t1", "--namespace", "default")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"orders"`)
	require.Eventually(t, func() bool {
		code, _, _ := felix("pub", "--addr", bp.addr, "--stream", "orders", "--ack", "x")
		return code == 0
	}, 10*time.Second, 50*time.Millisecond, "the broker follows its embedded control plane")
}

// One source of truth: the embedded control plane refuses a durable
// stream its broker cannot keep, saying why (it answered success, and
// publishes then found no stream); after a restart it lists the durable
// streams the data directory reopened (it listed only FELIX_STREAMS), so
// they can be described and deleted there, and a deletion reaches the
// broker.
func TestEmbeddedControlPlaneIsTheCatalog(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker processes and the felix CLI")
	}
	dev, data := filepath.Join(t.TempDir(), "dev"), t.TempDir()
	felix := felixCLI(t, dev)
	stop := func(bp *brokerProcess) {
		require.NoError(t, bp.cmd.Process.Signal(os.Interrupt))
		require.NoError(t, <-bp.exited)
	}
	embedded := []string{"FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0", "FELIX_DEV_DIR=" + dev}

	bp := startBrokerProcess(t, embedded...)
	code, _, stderr := felix("admin", "stream", "create", "jobs", "--durable", "--fsync", "on_commit")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "400 bad_request: this broker has no data directory (FELIX_DATA_DIR)")
	stop(bp)

	bp = startBrokerProcess(t, append(embedded, "FELIX_DATA_DIR="+data)...)
	code, _, stderr = felix("admin", "stream", "create", "jobs", "--durable", "--fsync", "on_commit")
	require.Equal(t, 0, code, stderr)
	require.Eventually(t, func() bool {
		code, _, _ := felix("pub", "--stream", "jobs", "--ack", "x")
		return code == 0
	}, 10*time.Second, 20*time.Millisecond)
	stop(bp)

	startBrokerProcess(t, append(embedded, "FELIX_DATA_DIR="+data)...)
	code, out, stderr := felix("admin", "stream", "list")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"jobs"`, "the reopened durable stream is in the catalog")
	code, out, stderr = felix("admin", "stream", "info", "jobs")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"next_offset": 1`)
	code, _, stderr = felix("admin", "stream", "delete", "jobs")
	require.Equal(t, 0, code, stderr)
	require.Eventually(t, func() bool {
		_, _, stderr := felix("pub", "--stream", "jobs", "--ack", "x")
		return strings.Contains(stderr, "stream not found")
	}, 10*time.Second, 20*time.Millisecond, "the broker follows the deletion")
}
