package testutil

import (
	"os/exec"
	"path"
	"path/filepath"
	"testing"
)

// GoBuild builds the main package importPath into the test's temporary
// directory and returns the binary's path, for tests that run a binary
// other than their own. It skips the test when no go toolchain is on PATH.
func GoBuild(t testing.TB, importPath string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain on PATH to build %s", importPath)
	}
	bin := filepath.Join(t.TempDir(), path.Base(importPath))
	if out, err := exec.Command(gobin, "build", "-o", bin, importPath).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", importPath, err, out)
	}
	return bin
}
