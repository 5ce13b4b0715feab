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
