package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/endpoint"
)

// RunWithDevDir runs the tests of a client tool in an environment of their
// own: FELIX_DEV_DIR is a fresh private directory whose token file holds
// "dev" (which the in-process test brokers' dev verifier accepts), the
// configuration directory (contexts) is empty, and none of the tools'
// variables (FELIX_ADDR, FELIX_TOKEN, ...) is set, so that no test reads
// the token or the addresses of a `make run` or a context on the machine.
// Use it as `func TestMain(m *testing.M) { os.Exit(testutil.RunWithDevDir(m)) }`.
func RunWithDevDir(m *testing.M) int {
	dir, err := os.MkdirTemp("", "felix-test-dev-")
	if err != nil {
		panic("testutil: " + err.Error())
	}
	defer os.RemoveAll(dir)
	dev := filepath.Join(dir, "dev")
	if err := os.Mkdir(dev, 0o700); err != nil {
		panic("testutil: " + err.Error())
	}
	if err := os.WriteFile(filepath.Join(dev, devdir.TokenFile), []byte("dev\n"), 0o600); err != nil {
		panic("testutil: " + err.Error())
	}
	for _, v := range endpoint.Vars {
		os.Unsetenv(v)
	}
	os.Setenv(devdir.DirEnv, dev)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	return m.Run()
}
