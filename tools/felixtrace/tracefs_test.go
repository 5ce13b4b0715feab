package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// --bpf mounts tracefs as root when it is missing, and otherwise says in
// one line the command that does.
func TestEnsureTracefs(t *testing.T) {
	dir, mount, uid := tracefsDir, mountTracefs, euid
	t.Cleanup(func() { tracefsDir, mountTracefs, euid = dir, mount, uid })
	tracefsDir = t.TempDir()
	var mounted []string
	mountTracefs = func(d string) error { mounted = append(mounted, d); return nil }

	var out bytes.Buffer
	euid = func() int { return 1000 }
	ensureTracefs(&out)
	require.Equal(t, "felixtrace: tracefs is not mounted at "+tracefsDir+"; the probes need it: sudo mount -t tracefs nodev "+tracefsDir+"\n", out.String())
	require.Empty(t, mounted)

	out.Reset()
	euid = func() int { return 0 }
	ensureTracefs(&out)
	require.Equal(t, []string{tracefsDir}, mounted)
	require.Contains(t, out.String(), "mounted tracefs at "+tracefsDir)

	out.Reset()
	mountTracefs = func(string) error { return errors.New("operation not permitted") }
	ensureTracefs(&out)
	require.Contains(t, out.String(), "failed (operation not permitted); try: mount -t tracefs nodev "+tracefsDir)

	out.Reset()
	require.NoError(t, os.Mkdir(filepath.Join(tracefsDir, "events"), 0o755))
	ensureTracefs(&out)
	require.Empty(t, out.String(), "mounted already: nothing to say")
}
