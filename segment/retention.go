package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// EnforceRetention removes whole sealed segments from the head of the log
// while the log holds more than RetentionBytes, or while the newest event
// of the oldest segment (generation records aside: a replica writes them
// with no time) is older than now-RetentionAge. The active segment
// is never removed. First rises to the base of the new head. It returns how
// many segments it removed.
//
// It is off the append path by design: the caller (the broker) runs it on a
// timer. It takes the log lock only to unlink segments from the list; file
// removal happens outside it. A reader that still holds a removed segment
// keeps its mapping until it closes (the file is already unlinked).
func (l *Log) EnforceRetention(now time.Time) (int, error) {
	if l.cfg.RetentionBytes == 0 && l.cfg.RetentionAge == 0 {
		return 0, nil
	}
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	var total int64
	for _, s := range l.mu.segs {
		total += s.bytes()
	}
	cutoff := now.Add(-l.cfg.RetentionAge).UnixMicro()
	floor := l.retentionFloor.Load()
	var victims []*segment
	for len(l.mu.segs) > 1 && l.mu.segs[0].sealed {
		head := l.mu.segs[0]
		if floor > 0 && head.next > floor {
			break
		}
		byBytes := l.cfg.RetentionBytes > 0 && total > l.cfg.RetentionBytes
		byAge := l.cfg.RetentionAge > 0 && head.lastTS < cutoff
		if !byBytes && !byAge {
			break
		}
		victims = append(victims, head)
		l.dropMappedLocked(head)
		total -= head.bytes()
		l.mu.segs = l.mu.segs[1:]
	}
	if len(victims) > 0 {
		l.first.Store(l.mu.segs[0].base)
	}
	l.mu.Unlock()
	if len(victims) == 0 {
		return 0, nil
	}
	var errs []error
	for _, s := range victims {
		// Data first: an index without its segment is an orphan Open removes.
		if err := l.fs.Remove(s.path); err != nil {
			errs = append(errs, err)
		}
		// The index is a hint a failed seal may not have written.
		if err := l.fs.Remove(s.indexPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		l.releaseSpace(s.allocated)
		errs = append(errs, s.release())
		l.stat.removed.Add(1)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return len(victims), fmt.Errorf("segment: retention: %w", err)
	}
	return len(victims), nil
}
