package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// RunWithDevToken runs the tests of a client tool with its default token
// file (*tokenFile, make run's FELIX_DEV_DIR/token) pointed at a file of
// its own holding "dev", which the in-process test brokers' dev verifier
// accepts, so that no test reads the token of a `make run` on the machine.
// Use it as `func TestMain(m *testing.M) { os.Exit(testutil.RunWithDevToken(m, &defaultTokenFile)) }`.
func RunWithDevToken(m *testing.M, tokenFile *string) int {
	dir, err := os.MkdirTemp("", "felix-test-dev-")
	if err != nil {
		panic("testutil: " + err.Error())
	}
	defer os.RemoveAll(dir)
	*tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(*tokenFile, []byte("dev\n"), 0o600); err != nil {
		panic("testutil: " + err.Error())
	}
	return m.Run()
}
