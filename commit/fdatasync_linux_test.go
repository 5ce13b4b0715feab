//go:build linux

package commit

import (
	"os"
	"syscall"
)

// fdatasync is the benchmark's real sync: data and the metadata needed to
// read it back (the file size), not the timestamps (fdatasync(2)). The raw
// call lives in a test file because the lint bans syscall imports outside
// internal/linux in library code, and commit/ itself does no I/O.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
