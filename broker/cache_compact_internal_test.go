package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// recoverCompaction finishes or undoes each state a crash can leave the
// swap in.
func TestRecoverCompaction(t *testing.T) {
	mk := func(t *testing.T, names ...string) string {
		root := t.TempDir()
		for _, n := range names {
			require.NoError(t, os.MkdirAll(filepath.Join(root, n), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, n, "mark"), []byte(n), 0o644))
		}
		return filepath.Join(root, "log")
	}
	mark := func(t *testing.T, dir string) string {
		b, err := os.ReadFile(filepath.Join(dir, "mark"))
		require.NoError(t, err)
		return string(b)
	}
	for name, tc := range map[string]struct {
		have []string
		want string
	}{
		"unfinished new log":    {[]string{"log", "log.compact"}, "log"},
		"between the renames":   {[]string{"log.old", "log.compact"}, "log.old"},
		"swapped, old not gone": {[]string{"log", "log.old"}, "log"},
		"nothing to recover":    {[]string{"log"}, "log"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := mk(t, tc.have...)
			require.NoError(t, recoverCompaction(dir))
			require.Equal(t, tc.want, mark(t, dir))
			for _, gone := range []string{".old", ".compact"} {
				_, err := os.Stat(dir + gone)
				require.ErrorIs(t, err, os.ErrNotExist)
			}
		})
	}
}
