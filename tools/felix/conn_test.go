package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devdir"
)

// Without a CA file or a pin the commands refuse to connect, and say how to
// fix it: never an unverified connection.
func TestMissingDefaultCA(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(devdir.DirEnv, dir)
	want := "no CA: pass --ca or --fingerprint (make run writes " + filepath.Join(dir, devdir.CertFile) + ")"
	for _, args := range [][]string{{"pub", "x"}, {"sub"}} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitFail, code, stderr)
		require.Contains(t, stderr, want)
	}
}

func TestExplicitCAMissingNamesTheFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.pem")
	code, _, stderr := runCLI("pub", "--ca", missing, "x")
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, missing)
	require.NotContains(t, stderr, "make run writes")
}

// Without --token, FELIX_TOKEN or make run's token file the commands say
// where the token comes from.
func TestMissingDefaultToken(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(devdir.DirEnv, dir)
	missing := filepath.Join(dir, devdir.TokenFile)
	pin := strings.Repeat("ab", 32)
	for _, args := range [][]string{{"pub", "--fingerprint", pin, "x"}, {"sub", "--fingerprint", pin}} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitFail, code, stderr)
		require.Contains(t, stderr, "no token: pass --token or set FELIX_TOKEN (make run writes "+missing+")")
	}
}
