package devdir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(kv map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestDirDefaultAndOverride(t *testing.T) {
	require.Equal(t, Default, Dir(env(nil)))
	require.Equal(t, Default, Dir(env(map[string]string{DirEnv: ""})))
	require.Equal(t, "/x/cert.pem", Path(env(map[string]string{DirEnv: "/x"}), CertFile))
}

// The flag wins over FELIX_TOKEN, which wins over the file; a missing file
// says where make run writes one.
func TestTokenPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, TokenFile)
	_, err := Token("", env(nil), file)
	require.EqualError(t, err, "no token: pass --token or set FELIX_TOKEN (make run writes "+file+")")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	tok, err := Token("", env(nil), file)
	require.NoError(t, err)
	require.Equal(t, "from-file", tok)
	tok, err = Token("", env(map[string]string{TokenEnv: "from-env"}), file)
	require.NoError(t, err)
	require.Equal(t, "from-env", tok)
	tok, err = Token("from-flag", env(map[string]string{TokenEnv: "from-env"}), file)
	require.NoError(t, err)
	require.Equal(t, "from-flag", tok)
	require.NoError(t, os.WriteFile(file, []byte("\n"), 0o600))
	_, err = Token("", env(nil), file)
	require.ErrorContains(t, err, "is empty")
}

func TestControlPlaneURL(t *testing.T) {
	dir := t.TempDir()
	lookup := env(map[string]string{DirEnv: dir})
	require.Equal(t, "http://fallback", ControlPlaneURL(lookup, "http://fallback"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ControlPlaneURLFile), []byte("http://127.0.0.1:1234\n"), 0o644))
	require.Equal(t, "http://127.0.0.1:1234", ControlPlaneURL(lookup, "http://fallback"))
}

// Ensure creates the directory 0700 and makes an existing one of this
// user 0700.
func TestEnsureMakesItPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "felix-dev")
	require.NoError(t, Ensure(dir))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, Ensure(dir))
	fi, err = os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

// A directory another user pre-created (here owned by nobody): the broker
// must not write its token there, and a client must not read a control
// plane URL or token from it, since that user could swap them.
func TestAnotherUsersDirIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "felix-dev")
	require.NoError(t, os.Mkdir(dir, 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ControlPlaneURLFile), []byte("http://evil.example\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, TokenFile), []byte("planted\n"), 0o644))
	require.NoError(t, os.Chown(dir, 65534, 65534))
	require.ErrorIs(t, Ensure(dir), ErrNotPrivate)
	require.ErrorIs(t, Check(dir), ErrNotPrivate)
	lookup := env(map[string]string{DirEnv: dir})
	require.Equal(t, "http://fallback", ControlPlaneURL(lookup, "http://fallback"))
	_, err := Token("", lookup, filepath.Join(dir, TokenFile))
	require.ErrorIs(t, err, ErrNotPrivate)
}

// A directory of this user that others may write into is not read from.
func TestWritableDirIsNotReadFrom(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "felix-dev")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ControlPlaneURLFile), []byte("http://x\n"), 0o644))
	require.NoError(t, os.Chmod(dir, 0o777))
	lookup := env(map[string]string{DirEnv: dir})
	require.Equal(t, "http://fallback", ControlPlaneURL(lookup, "http://fallback"))
	require.NoError(t, os.Chmod(dir, 0o700))
	require.Equal(t, "http://x", ControlPlaneURL(lookup, "http://fallback"))
}

// One broker at a time holds a directory: a second Take fails naming the
// holder's addresses; Release frees it and forgets the addresses, keeping
// the certificate.
func TestClaimIsExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	c, err := Take(dir)
	require.NoError(t, err)
	require.NoError(t, c.WriteFile(CertFile, "pem", 0o644))
	require.NoError(t, c.WriteBroker(Broker{PID: 7, QUIC: "127.0.0.1:5000", Admin: "127.0.0.1:8080"}))
	b, ok := ReadBroker(env(map[string]string{DirEnv: dir}))
	require.True(t, ok)
	require.Equal(t, "127.0.0.1:5000", b.QUIC)
	if linuxLocks {
		_, err = Take(dir)
		require.ErrorIs(t, err, ErrInUse)
		require.ErrorContains(t, err, "the broker listening on 127.0.0.1:5000 (admin 127.0.0.1:8080, pid 7)")
	}
	c.Release()
	_, ok = ReadBroker(env(map[string]string{DirEnv: dir}))
	require.False(t, ok)
	require.FileExists(t, filepath.Join(dir, CertFile))
	c2, err := Take(dir)
	require.NoError(t, err)
	c2.Release()
}

// A file is replaced with its mode even where an earlier file was readable
// by all (the token: 0600), and a reader never sees it half written (it is
// replaced by a rename).
func TestWriteFileReplacesWithMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	c, err := Take(dir)
	require.NoError(t, err)
	defer c.Release()
	path := filepath.Join(dir, TokenFile)
	require.NoError(t, os.WriteFile(path, []byte("old\n"), 0o644))
	require.NoError(t, c.WriteFile(TokenFile, "new\n", 0o600))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new\n", string(got))
	left, err := filepath.Glob(filepath.Join(dir, ".*"))
	require.NoError(t, err)
	require.Empty(t, left, "no temporary file left behind")
}
