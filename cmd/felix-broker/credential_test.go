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

	// Once renewed, the renewer's token is current until the file is
	// rotated again; then the renewer adopts the file's, once.
	current, adopted := "renewed", []string{}
	c.renewBy(func() string { return current }, func(tok string) { adopted = append(adopted, tok); current = tok })
	require.Equal(t, "renewed", c.Token())
	recheck()
	require.Equal(t, "renewed", c.Token(), "an unchanged file does not undo a renewal")
	require.NoError(t, os.WriteFile(path, []byte("second-token\n"), 0o600))
	recheck()
	require.Equal(t, "renewed", c.Token(), "a file touched with the same token does not either")
	require.NoError(t, os.WriteFile(path, []byte("rotated"), 0o600))
	recheck()
	require.Equal(t, "rotated", c.Token())
	recheck()
	require.Equal(t, "rotated", c.Token())
	require.Equal(t, []string{"rotated"}, adopted)

	_, err = fileCredential("FELIX_X", filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, errConfig)
	require.ErrorContains(t, err, "FELIX_X")
}
