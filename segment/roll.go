package segment

import (
	"errors"
	"fmt"
	"os"

	"github.com/felixmq/felix/internal/linux"
)

// rollLocked seals the active segment and installs a new one big enough for
// a batch of need bytes. Any failure is terminal for the log and recorded
// before rollLocked returns, except no space (ErrNoSpace): for the steps of
// the seal after the write back, after which the segment stays active, or
// for the new segment, after which the sealed segment stays the newest;
// either way the next call tries again.
//
// Order (each step durable before the next, so recovery always finds either
// the old segment as the newest or a fully installed new one):
//  1. seal the old segment: write its data back (msync or fdatasync),
//     truncate the file to its contents, fsync it (the size is metadata);
//  2. write and fsync its index (a hint: a torn index is rebuilt);
//  3. create the next segment: preallocate, write and fsync its header;
//  4. fsync the directory (the new entry, and the old index's entry).
//
// The new segment is of version (at least FormatVersion).
func (l *Log) rollLocked(need int64, version uint16) error {
	old := l.mu.segs[len(l.mu.segs)-1]
	if old.next == old.base {
		// Empty: a batch larger than it, or of a later version, needs a
		// segment of its own, which would get the same base (and file
		// name). Enlarge it, or raise its version, instead.
		return l.enlargeEmptyLocked(old, need, max(version, l.cfg.FormatVersion))
	}
	if !old.sealed {
		err := l.sealLocked(old)
		if errors.Is(err, ErrNoSpace) {
			l.stat.noSpace.Add(1)
			return err // the segment stays active; the next Append seals again
		}
		if err != nil {
			return l.failLocked(err)
		}
		advanceU(&l.durable, old.next) // sealing synced it
	}
	size := max(l.cfg.SegmentBytes, SegmentHeaderBytes+need)
	alloc := max(l.cfg.InitialAllocBytes, SegmentHeaderBytes+need)
	if err := l.reserveLocked(alloc); err != nil {
		return fmt.Errorf("%w: roll at offset %d: %w", ErrNoSpace, old.next, err)
	}
	created := l.cfg.Now().UnixMicro()
	s, err := createSegment(l.fs, l.dir, old.next, max(version, l.cfg.FormatVersion), size, alloc, created)
	if err != nil {
		l.releaseSpace(alloc)
	}
	if err != nil && linux.IsNoSpace(err) {
		// createSegment removed its file; the log stays as it was, with
		// old sealed, and the next Append retries.
		l.stat.noSpace.Add(1)
		return fmt.Errorf("%w: roll at offset %d: %w", ErrNoSpace, old.next, err)
	}
	if err != nil {
		return l.failLocked(fmt.Errorf("roll: %w", err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		_ = s.release()
		return l.failLocked(fmt.Errorf("roll: sync dir %s: %w", l.dir, err))
	}
	l.mu.segs = append(l.mu.segs, s)
	advanceU(&l.durable, s.base)
	l.stat.rolls.Add(1)
	return nil
}

// enlargeEmptyLocked makes the empty last segment s big enough for need
// bytes: preallocated and mapped at the size a roll would have given a new
// segment. Nothing reads an empty segment's mapping (readers stop at its
// written end, the header), so it can be replaced. A sealed one (a roll
// that found no space after sealing it) is active again.
func (l *Log) enlargeEmptyLocked(s *segment, need int64, version uint16) error {
	size := max(l.cfg.SegmentBytes, SegmentHeaderBytes+need)
	alloc := max(l.cfg.InitialAllocBytes, SegmentHeaderBytes+need)
	if s.file == nil { // sealed: its file was closed
		f, err := l.fs.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			return l.failLocked(fmt.Errorf("roll: reopen %s: %w", s.path, err))
		}
		s.file = f
		s.sealed = false
		s.closeAfterSync.Store(false)
	}
	if alloc > s.allocated {
		if err := l.reserveLocked(alloc - s.allocated); err != nil {
			return fmt.Errorf("%w: roll at offset %d: %w", ErrNoSpace, s.next, err)
		}
		if err := s.file.Preallocate(alloc); err != nil {
			l.releaseSpace(alloc - s.allocated)
			return noSpaceOr(fmt.Errorf("roll: preallocate %s: %w", s.path, err))
		}
		s.allocated = alloc
	}
	if version > s.version {
		// Its header says what its records may be: rewrite it, synced
		// before a record of the new version can follow.
		var hdr [SegmentHeaderBytes]byte
		created := l.cfg.Now().UnixMicro()
		putSegmentHeader(hdr[:], SegmentHeader{Version: version, BaseOffset: s.base, CreatedAtMicros: created})
		if err := writeFull(s.file, hdr[:], 0); err != nil {
			return l.failLocked(fmt.Errorf("roll: rewrite the header of %s: %w", s.path, err))
		}
		if err := s.file.Sync(); err != nil {
			return l.failLocked(fmt.Errorf("roll: sync %s: %w", s.path, err))
		}
		s.version, s.lastTS = version, created
	}
	if size > int64(len(s.data)) {
		if err := s.mapping.Unmap(); err != nil {
			return l.failLocked(fmt.Errorf("roll: unmap %s: %w", s.path, err))
		}
		s.mapping, s.data = nil, nil
		if err := s.mapFile(size); err != nil {
			return l.failLocked(fmt.Errorf("roll: %w", err))
		}
	}
	l.stat.rolls.Add(1)
	return nil
}

// growLocked preallocates more of the active segment s for a batch of
// need bytes: twice its allocation, or what the batch needs, within its
// mapping. No space (from Config.Space or the file system) fails the
// append with ErrNoSpace and leaves the log usable; a later append tries
// again. The file system's refusal may have extended the file in part,
// which the allocation then counts.
func (l *Log) growLocked(s *segment, need int64) error {
	target := min(int64(len(s.data)), max(2*s.allocated, s.written.Load()+need))
	if err := l.reserveLocked(target - s.allocated); err != nil {
		return fmt.Errorf("%w: grow %s to %d bytes: %w", ErrNoSpace, s.path, target, err)
	}
	err := s.file.Preallocate(target)
	if err == nil {
		s.allocated = target
		return nil
	}
	got := s.allocated
	if size, serr := s.file.Size(); serr == nil && size > got {
		got = min(size, target)
	}
	l.releaseSpace(target - got)
	s.allocated = got
	if linux.IsNoSpace(err) {
		l.stat.noSpace.Add(1)
		return fmt.Errorf("%w: grow %s to %d bytes: %w", ErrNoSpace, s.path, target, err)
	}
	return l.failLocked(fmt.Errorf("grow %s to %d bytes: %w", s.path, target, err))
}

func (l *Log) reserveLocked(n int64) error {
	if l.cfg.Space == nil || n <= 0 {
		return nil
	}
	if err := l.cfg.Space.Reserve(n); err != nil {
		l.stat.noSpace.Add(1)
		return err
	}
	return nil
}

func (l *Log) releaseSpace(n int64) {
	if l.cfg.Space != nil && n > 0 {
		l.cfg.Space.Release(n)
	}
}

// sealLocked makes s immutable and durable: data written back, file
// truncated to its contents, index written.
//
// Once the data is written back, no space for the steps after it (the
// truncate and its fsync change metadata only, and both may be done again)
// returns an error wrapping ErrNoSpace and leaves s active, to be sealed by
// the next roll, as a roll that finds no space for the next segment does.
// The index is a hint that recovery checks entry by entry and rebuilds: a
// failure to write it seals s without one. A write-back failure is
// terminal: what the page cache holds is then unknown.
func (l *Log) sealLocked(s *segment) error {
	end := s.written.Load()
	from := s.synced.Load()
	var err error
	if l.cfg.WriteMode == WriteModeFD {
		err = s.file.SyncData()
	} else {
		err = s.mapping.Sync(from, end-from)
	}
	if err != nil {
		return fmt.Errorf("seal %s: write back: %w", s.path, err)
	}
	advance(&s.synced, end)
	if err := s.file.Truncate(end); err != nil {
		return noSpaceOr(fmt.Errorf("seal %s: truncate to %d: %w", s.path, end, err))
	}
	l.releaseSpace(s.allocated - end)
	s.allocated = end
	if err := s.file.Sync(); err != nil {
		return noSpaceOr(fmt.Errorf("seal %s: fsync: %w", s.path, err))
	}
	s.sealed = true
	if err := writeIndex(l.fs, s.indexPath, s.base, s.index); err != nil {
		_ = l.fs.Remove(s.indexPath)
		l.cfg.Logger.Warn("segment: index not written; the next open rebuilds it", "segment", s.path, "err", err)
	}
	// Its mapping serves it from now on. A Sync still writing it back
	// closes the file when done (syncDone); the flag is set before the
	// check so that one of the two always does.
	s.closeAfterSync.Store(true)
	if !s.syncing.Load() {
		_ = s.closeFile()
	}
	l.addMappedLocked(s)
	return nil
}

// noSpaceOr wraps err in ErrNoSpace when the file system is full.
func noSpaceOr(err error) error {
	if linux.IsNoSpace(err) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// writeIndex writes and fsyncs an index file.
func writeIndex(fsys FS, path string, base uint64, entries []IndexEntry) error {
	b := encodeIndex(base, entries)
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("index %s: %w", path, err)
	}
	err = writeFull(f, b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("index %s: %w", path, err)
	}
	return nil
}
