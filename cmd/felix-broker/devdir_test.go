package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cmd/internal/command"
	"github.com/felixmq/felix/internal/devdir"
)

// A broker started twice leaves the first one's clients working: the
// second fails to bind the same ports, or finds the dev directory held,
// and either way exits 2 without changing a byte of the directory (a
// replaced cert.pem made every client of the first broker fail with
// "certificate signed by unknown authority"). The first broker says
// where it listens in broker.json, and stops saying it when it stops.
func TestSecondBrokerChangesNothingInTheDevDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker processes and the felix CLI")
	}
	bp := startBrokerProcess(t, "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0")
	dir := filepath.Dir(bp.cert)
	var info devdir.Broker
	raw, err := os.ReadFile(filepath.Join(dir, devdir.BrokerFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &info))
	require.Equal(t, devdir.Broker{PID: bp.cmd.Process.Pid, QUIC: bp.addr, Admin: bp.admin, ControlPlane: info.ControlPlane}, info)
	before := snapshotDir(t, dir)

	for name, env := range map[string][]string{
		"same ports":         {"FELIX_QUIC_BIND=" + bp.addr, "FELIX_ADMIN_BIND=" + bp.admin},
		"same dev directory": {"FELIX_QUIC_BIND=" + freeAddr(t, "udp"), "FELIX_ADMIN_BIND=" + freeAddr(t, "tcp")},
	} {
		out, err := brokerCmd(t, append(env, "FELIX_DEV_DIR="+dir, "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0")).CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s: the second broker started: %s", name, out)
		require.Equal(t, command.ExitConfig, ee.ExitCode(), "%s: %s", name, out)
		require.Equal(t, before, snapshotDir(t, dir), "%s: the dev directory changed", name)
		if name == "same dev directory" {
			require.Contains(t, string(out), "in use by another running broker: "+dir+": the broker listening on "+bp.addr)
		}
	}

	felix := felixCLI(t, dir)
	code, _, stderr := felix("pub", "--ack", "hello") // no --addr: broker.json says where
	require.Equal(t, 0, code, stderr)

	require.NoError(t, bp.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-bp.exited:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the broker did not stop")
	}
	require.NoFileExists(t, filepath.Join(dir, devdir.BrokerFile), "a stopped broker is not announced")
	require.FileExists(t, filepath.Join(dir, devdir.CertFile))
}

// snapshotDir is every file of dir with its content and mode.
func snapshotDir(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		fi, err := e.Info()
		require.NoError(t, err)
		out[e.Name()] = fi.Mode().String() + " " + fi.ModTime().String() + " " + string(raw)
	}
	return out
}
