package segment

import (
	"container/list"
	"errors"
	"fmt"
	"os"

	"github.com/felixmq/felix/internal/invariants"
)

// mapCache bounds how many sealed segments are mapped: a log that retains
// thousands of segments would otherwise hold a mapping (and its page
// tables) per segment for as long as it runs. Sealed segments are mapped
// when a reader needs them and unmapped, least recently used first, when
// more than max are mapped and nothing holds them. A segment a reader
// holds (a reference beyond the log's own) is never unmapped: the payloads
// it handed out alias the mapping. Guarded by Log.mu.
type mapCache struct {
	max int       // 0: no bound
	lru list.List // of *segment: sealed and mapped, most recent first
}

// addLocked enters a sealed, mapped segment as the most recently used.
func (l *Log) addMappedLocked(s *segment) {
	s.lru = l.mu.maps.lru.PushFront(s)
	l.evictLocked()
}

// dropLocked forgets s, which leaves the log's list.
func (l *Log) dropMappedLocked(s *segment) {
	if s.lru != nil {
		l.mu.maps.lru.Remove(s.lru)
		s.lru = nil
	}
}

// acquireMappedLocked takes a reference on s for a reader, mapping it
// first if the cache had unmapped it. The caller holds l.mu and s is in the
// log's list, so the log's own reference keeps it: taking the second one
// under l.mu is what keeps evictLocked from unmapping it meanwhile.
func (l *Log) acquireMappedLocked(s *segment) error {
	switch {
	case s.mapping == nil:
		if err := s.remap(l.fs); err != nil {
			return err
		}
		s.lru = l.mu.maps.lru.PushFront(s)
	case s.lru != nil:
		l.mu.maps.lru.MoveToFront(s.lru)
	}
	s.acquire()
	l.evictLocked()
	return nil
}

// evictLocked unmaps the least recently used sealed segments that only the
// log holds until at most max are mapped, or only held ones are left.
func (l *Log) evictLocked() {
	c := &l.mu.maps
	if c.max == 0 {
		return
	}
	for e := c.lru.Back(); e != nil && c.lru.Len() > c.max; {
		s, prev := e.Value.(*segment), e.Prev()
		// refs only rises from 1 under l.mu (acquireMappedLocked, Sync):
		// a segment seen at 1 here has no reader until we unlock.
		if s.refs.Load() == 1 && !s.syncing.Load() {
			if err := s.mapping.Unmap(); err != nil {
				l.cfg.Logger.Warn("segment: unmap", "segment", s.path, "err", err)
			}
			s.mapping, s.data = nil, nil
			c.lru.Remove(e)
			s.lru = nil
		}
		e = prev
	}
	if invariants.Enabled {
		for e := c.lru.Front(); e != nil; e = e.Next() {
			if s := e.Value.(*segment); s.mapping == nil || !s.sealed {
				panic(fmt.Sprintf("segment: %s in the map cache unmapped or not sealed", s.path))
			}
		}
	}
}

// releaseMapped drops a reader's references on segs, then unmaps what that
// leaves over the bound: a reader is what held the cache over it.
func (l *Log) releaseMapped(segs ...*segment) error {
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.release())
	}
	if l.cfg.MaxMappedSegments == 0 {
		return errors.Join(errs...)
	}
	l.mu.Lock()
	if !l.mu.closed {
		l.evictLocked()
	}
	l.mu.Unlock()
	return errors.Join(errs...)
}

// remap maps a sealed segment again: its file is its contents, and the
// descriptor is closed once mapped, as sealed segments hold none.
func (s *segment) remap(fsys FS) error {
	f, err := fsys.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("segment: map %s: %w", s.path, err)
	}
	s.file = f
	err = s.mapFile(s.allocated)
	if cerr := s.closeFile(); err == nil && cerr != nil {
		err = fmt.Errorf("segment: close %s: %w", s.path, cerr)
		_ = s.mapping.Unmap()
		s.mapping, s.data = nil, nil
	}
	if err != nil {
		return fmt.Errorf("segment: map %s: %w", s.path, err)
	}
	return nil
}

// MappedSegments is how many of the log's segments are mapped now.
func (l *Log) MappedSegments() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.mu.segs {
		if s.mapping != nil {
			n++
		}
	}
	return n
}
