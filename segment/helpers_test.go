package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func openLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func payload(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j + 1)
	}
	return b
}

// readAll returns every record from offset from, copying the payloads.
func readAll(t testing.TB, l *Log, from uint64) []Record {
	t.Helper()
	r, err := l.NewReader(from)
	require.NoError(t, err)
	defer r.Close()
	var out []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		rec.Payload = append([]byte{}, rec.Payload...)
		out = append(out, rec)
	}
}

func segFiles(t testing.TB, dir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*."+ext))
	require.NoError(t, err)
	return m
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}

// patchFile XORs mask into the file at off.
func patchFile(t testing.TB, path string, off int64, mask ...byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, len(mask))
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= mask[i]
	}
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

func logPath(dir string, base uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d.log", base))
}

func writeMode(fd bool) WriteMode {
	if fd {
		return WriteModeFD
	}
	return WriteModeMapped
}
