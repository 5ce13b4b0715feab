package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// WriteFileAtomic leaves either the old content or the new one: every
// failure before the rename keeps the old file and removes the temporary
// one; a failed directory sync is reported after the rename.
func TestWriteFileAtomic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failOp  string // the operation that fails, "" for none
		want    string // the file's content afterwards
		wantErr bool
	}{
		{name: "replaces", want: "new"},
		{name: "open fails", failOp: "open", want: "old", wantErr: true},
		{name: "write fails", failOp: "write", want: "old", wantErr: true},
		{name: "short write", failOp: "short", want: "old", wantErr: true},
		{name: "sync fails", failOp: "sync", want: "old", wantErr: true},
		{name: "rename fails", failOp: "rename", want: "old", wantErr: true},
		{name: "directory sync fails after the rename", failOp: "syncdir", want: "new", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state")
			require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
			fsys := &faultFS{}
			fsys.set(func(op, _ string) error {
				switch {
				case tc.failOp == "short" && op == "write":
					return errShortWrite
				case op == tc.failOp:
					return errInjected
				}
				return nil
			})
			err := WriteFileAtomic(fsys, path, []byte("new"))
			if tc.wantErr {
				require.Error(t, err)
				if tc.failOp != "short" {
					require.True(t, errors.Is(err, errInjected), "%v", err)
				}
			} else {
				require.NoError(t, err)
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			_, err = os.Stat(path + ".tmp")
			require.True(t, errors.Is(err, os.ErrNotExist), "the temporary file is gone")
		})
	}
}

// A missing directory is created, and a nil FS is the operating system's.
func TestWriteFileAtomicCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "state")
	require.NoError(t, WriteFileAtomic(nil, path, []byte("x")))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
}
