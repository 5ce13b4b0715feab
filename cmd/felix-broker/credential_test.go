package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A credential file rewritten while the broker runs (a rotated token) is
// read again; one emptied or removed keeps the last good token.
func TestCredentialFollowsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("first\n"), 0o600))
	c, err := fileCredential("FELIX_X", path)
	require.NoError(t, err)
	require.Equal(t, "first", c.Token())

	recheck := func() { c.mu.Lock(); c.mu.checked = time.Time{}; c.mu.Unlock() }
	require.NoError(t, os.WriteFile(path, []byte("second-token"), 0o600))
	require.Equal(t, "first", c.Token(), "read again before credentialRecheck")
	recheck()
	require.Equal(t, "second-token", c.Token())

	require.NoError(t, os.WriteFile(path, nil, 0o600))
	recheck()
	require.Equal(t, "second-token", c.Token(), "an empty file is not a token")
	require.NoError(t, os.Remove(path))
	recheck()
	require.Equal(t, "second-token", c.Token())

	c.renewBy(func() string { return "renewed" })
	require.Equal(t, "renewed", c.Token())

	_, err = fileCredential("FELIX_X", filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, errConfig)
	require.ErrorContains(t, err, "FELIX_X")
}
