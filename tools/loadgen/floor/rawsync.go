package floor

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/felixmq/felix/internal/linux"
)

// rawSyncFileBytes is preallocated, as a segment preallocates.
const rawSyncFileBytes = 64 << 20

// RawSync appends 4 KiB at a time to a preallocated file and fdatasyncs
// each: the raw calls a durable shard makes per on_commit publish, without
// the broker (every write lands in an unwritten extent, whose conversion
// the sync commits, as in a fresh segment).
type RawSync struct {
	mu  sync.Mutex // Append is called from every stream of an echo server
	f   *os.File
	off int64
	buf []byte
}

// OpenRawSync creates a file of its own in dir.
func OpenRawSync(dir string) (*RawSync, error) {
	f, err := os.CreateTemp(dir, "floor-raw-sync-*")
	if err != nil {
		return nil, err
	}
	if err := linux.Fallocate(f.Fd(), 0, 0, rawSyncFileBytes); err != nil {
		if err := f.Truncate(rawSyncFileBytes); err != nil {
			f.Close()
			return nil, err
		}
	}
	r := &RawSync{f: f, buf: make([]byte, 4096)}
	for i := range r.buf {
		r.buf[i] = byte(i*7 + 1)
	}
	return r, nil
}

// Append writes the next 4 KiB (from the start again once the file is
// full) and syncs; it returns how long both took.
func (r *RawSync) Append() (time.Duration, error) { return r.Write(r.buf) }

// Write appends p, as Append its 4 KiB: the echo server appends each
// request as a log appends a record.
func (r *RawSync) Write(p []byte) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off+int64(len(p)) > rawSyncFileBytes {
		r.off = 0
	}
	t0 := time.Now()
	if _, err := r.f.WriteAt(p, r.off); err != nil {
		return 0, err
	}
	err := linux.Fdatasync(r.f.Fd())
	if errors.Is(err, linux.ErrNotSupported) {
		err = r.f.Sync()
	}
	if err != nil {
		return 0, err
	}
	r.off += int64(len(p))
	return time.Since(t0), nil
}

// Close closes and removes the file.
func (r *RawSync) Close() error {
	err := r.f.Close()
	return errors.Join(err, os.Remove(r.f.Name()))
}
