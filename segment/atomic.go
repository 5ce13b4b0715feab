package segment

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data through fsys so that a crash at
// any point leaves either the old content or the new one, never a mix, and
// a nil return means the new content is durable: write a temporary file
// beside it (path + ".tmp"), sync it, rename it over path, sync the
// directory. On an error the temporary file is removed and path keeps what
// it had (unless the error came from the last directory sync, after which
// the rename may or may not survive a crash).
//
// It is for small state files written whole (the broker's catalog, a
// consumer group's position), where rewriting beats appending to a log that
// recovery would replay. Going through fsys lets tests inject faults into
// these writes as into the logs'.
func WriteFileAtomic(fsys FS, path string, data []byte) error {
	if fsys == nil {
		fsys = OSFS{}
	}
	dir := filepath.Dir(path)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	n, err := f.WriteAt(data, 0)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(dir)
}

// ReadFile reads the whole of a small file written by WriteFileAtomic,
// through fsys (nil: the operating system's).
func ReadFile(fsys FS, path string) ([]byte, error) {
	if fsys == nil {
		fsys = OSFS{}
	}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return b, nil
}
