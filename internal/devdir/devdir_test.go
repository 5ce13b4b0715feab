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
