//go:build !linux

package commit

import "os"

// fdatasync falls back to fsync where fdatasync(2) is not available; on
// darwin (*os.File).Sync is F_FULLFSYNC, slower and stronger.
func fdatasync(f *os.File) error { return f.Sync() }
