package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// MemoryConfig configures a MemoryStore. The zero value is the default.
type MemoryConfig struct {
	// History is how many changes the feed retains; a reader whose cursor
	// falls further behind must resync from a snapshot. 0 means 10000.
	History int
}

// DefaultHistory is the changes a MemoryStore retains by default.
const DefaultHistory = 10000

func (c MemoryConfig) withDefaults() MemoryConfig {
	if c.History == 0 {
		c.History = DefaultHistory
	}
	return c
}

// MemoryStore is the in-memory Store: the default for a single control
// plane, and what an embedded control plane uses. Its state dies with the
// process; a reader holding a cursor from a previous process is told to
// resync because its cursor is ahead of the new store.
//
// Design: one mutex guards the items, the retained log and the revision.
// Waiters do not poll: each takes the current wake channel under the lock
// and blocks on it; every change closes that channel and installs a fresh
// one, which is a broadcast that cannot be missed between the check and
// the wait.
type MemoryStore struct {
	history int
	mu      struct {
		sync.Mutex
		closed    bool
		revision  int64
		compacted int64 // changes up to this revision were dropped from log
		items     map[string]Item
		children  map[string]int // store key -> number of children
		log       []Change       // revisions compacted+1 .. revision
		wake      chan struct{}
		cluster   memoryCluster // members and placement (store_memory_members.go)
	}
}

// NewMemoryStore returns an empty store.
func NewMemoryStore(cfg MemoryConfig) (*MemoryStore, error) {
	cfg = cfg.withDefaults()
	if cfg.History < 1 {
		return nil, fmt.Errorf("%w: memory store history %d must be at least 1", ErrInvalid, cfg.History)
	}
	s := &MemoryStore{history: cfg.History}
	s.mu.items = map[string]Item{}
	s.mu.children = map[string]int{}
	s.mu.wake = make(chan struct{})
	return s, nil
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, ref Ref, value []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	key := StoreKey(ref)
	if _, ok := s.mu.items[key]; ok {
		return 0, refErr(ErrExists, ref)
	}
	parent, hasParent := parentOf(ref)
	if hasParent {
		if _, ok := s.mu.items[StoreKey(parent)]; !ok {
			return 0, refErr(ErrParentNotFound, parent)
		}
		s.mu.children[StoreKey(parent)]++
	}
	rev := s.mu.revision + 1
	value = slices.Clone(value)
	s.mu.items[key] = Item{Ref: ref, Revision: rev, Value: value}
	s.appendLocked(Change{Revision: rev, Op: OpCreated, Ref: ref, Object: value})
	return rev, nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(_ context.Context, ref Ref) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	key := StoreKey(ref)
	if _, ok := s.mu.items[key]; !ok {
		return 0, refErr(ErrNotFound, ref)
	}
	if n := s.mu.children[key]; n > 0 {
		return 0, &RefError{Err: ErrNotEmpty, Ref: ref, Detail: fmt.Sprintf("it holds %d resources", n)}
	}
	delete(s.mu.items, key)
	delete(s.mu.children, key)
	if parent, ok := parentOf(ref); ok {
		s.mu.children[StoreKey(parent)]--
	}
	rev := s.mu.revision + 1
	s.appendLocked(Change{Revision: rev, Op: OpDeleted, Ref: ref})
	return rev, nil
}

// appendLocked records c as the newest change, trims the log to the
// retained history and wakes every waiter.
func (s *MemoryStore) appendLocked(c Change) {
	s.mu.revision = c.Revision
	s.mu.log = append(s.mu.log, c)
	if drop := len(s.mu.log) - s.history; drop > 0 {
		s.mu.compacted = s.mu.log[drop-1].Revision
		// Reslicing is enough to bound memory: once the capacity left
		// after the window runs out, append copies only the live window
		// into a new array.
		s.mu.log = s.mu.log[drop:]
	}
	s.broadcastLocked()
}

// broadcastLocked wakes every waiter (Wait and Notify).
func (s *MemoryStore) broadcastLocked() {
	close(s.mu.wake)
	s.mu.wake = make(chan struct{})
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, ref Ref) (Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return Item{}, ErrClosed
	}
	it, ok := s.mu.items[StoreKey(ref)]
	if !ok {
		return Item{}, refErr(ErrNotFound, ref)
	}
	return it, nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, kind Kind, parent string) ([]Item, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, 0, ErrClosed
	}
	prefix := ListPrefix(kind, parent)
	items := []Item{}
	for key, it := range s.mu.items {
		if strings.HasPrefix(key, prefix) {
			items = append(items, it)
		}
	}
	sortItems(items)
	return items, s.mu.revision, nil
}

// Snapshot implements Store.
func (s *MemoryStore) Snapshot(context.Context) (int64, []Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, nil, ErrClosed
	}
	items := make([]Item, 0, len(s.mu.items))
	for _, it := range s.mu.items {
		items = append(items, it)
	}
	sortItems(items)
	return s.mu.revision, items, nil
}

func sortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int { return strings.Compare(StoreKey(a.Ref), StoreKey(b.Ref)) })
}

// Changes implements Store.
func (s *MemoryStore) Changes(_ context.Context, after int64, limit int) (Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return Page{}, ErrClosed
	}
	if err := s.checkCursorLocked(after); err != nil {
		return Page{}, err
	}
	log := s.mu.log
	i := sort.Search(len(log), func(i int) bool { return log[i].Revision > after })
	rest := log[i:]
	p := Page{Revision: s.mu.revision}
	if len(rest) > limit {
		rest, p.Truncated = rest[:limit], true
	}
	p.Changes = slices.Clone(rest)
	return p, nil
}

func (s *MemoryStore) checkCursorLocked(after int64) error {
	switch {
	case after < s.mu.compacted:
		return &ResyncError{Cursor: after, Oldest: s.mu.compacted, Revision: s.mu.revision}
	case after > s.mu.revision:
		return &ResyncError{Cursor: after, Oldest: s.mu.compacted, Revision: s.mu.revision, Ahead: true}
	}
	return nil
}

// Wait implements Store.
func (s *MemoryStore) Wait(ctx context.Context, after int64) error {
	for {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		if err := s.checkCursorLocked(after); err != nil || s.mu.revision > after {
			s.mu.Unlock()
			return err
		}
		wake := s.mu.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close implements Store; pending waiters return ErrClosed.
func (s *MemoryStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.mu.closed = true
		close(s.mu.wake)
		if s.mu.cluster.timer != nil {
			s.mu.cluster.timer.Stop()
		}
	}
	return nil
}
