package controlplane

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/felixmq/felix/cluster"
)

// memberLease is a member of a MemoryStore and its emulated lease.
type memberLease struct {
	member  cluster.Member
	ttl     time.Duration
	expires time.Time
}

// memoryCluster is the MemoryStore's cluster state, guarded by its mutex.
// A timer set to the earliest lease expiry removes lapsed members (and
// wakes Notify) without waiting for a request; reads also drop them.
type memoryCluster struct {
	members   map[string]*memberLease
	placement cluster.Placement              // Version: placementVersion
	loads     map[string][]cluster.ShardLoad // last report by member ID, kept after it leaves
	version   int64
	timer     *time.Timer
}

// Register implements MemberStore.
func (s *MemoryStore) Register(_ context.Context, m cluster.Member, ttl time.Duration) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	m.Live = true
	if s.mu.cluster.members == nil {
		s.mu.cluster.members = map[string]*memberLease{}
	}
	s.mu.cluster.members[m.ID] = &memberLease{member: m, ttl: ttl, expires: time.Now().Add(ttl)}
	s.leasesChangedLocked()
	return ttl, nil
}

// KeepAlive implements MemberStore.
func (s *MemoryStore) KeepAlive(_ context.Context, id string, load []cluster.ShardLoad) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	s.expireLocked()
	l, ok := s.mu.cluster.members[id]
	if !ok {
		return 0, memberErr(id)
	}
	l.expires = time.Now().Add(l.ttl)
	if load != nil {
		if s.mu.cluster.loads == nil {
			s.mu.cluster.loads = map[string][]cluster.ShardLoad{}
		}
		s.mu.cluster.loads[id] = slices.Clone(load) // no broadcast: load alone moves nothing
	}
	s.scheduleLocked()
	return l.ttl, nil
}

// Loads implements MemberStore.
func (s *MemoryStore) Loads(context.Context) (map[string][]cluster.ShardLoad, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	out := make(map[string][]cluster.ShardLoad, len(s.mu.cluster.loads))
	for id, l := range s.mu.cluster.loads {
		out[id] = slices.Clone(l)
	}
	return out, nil
}

// Leave implements MemberStore.
func (s *MemoryStore) Leave(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	s.expireLocked()
	if _, ok := s.mu.cluster.members[id]; !ok {
		return memberErr(id)
	}
	delete(s.mu.cluster.members, id)
	s.leasesChangedLocked()
	return nil
}

// Members implements MemberStore.
func (s *MemoryStore) Members(context.Context) ([]cluster.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	s.expireLocked()
	out := make([]cluster.Member, 0, len(s.mu.cluster.members))
	for _, l := range s.mu.cluster.members {
		out = append(out, l.member)
	}
	slices.SortFunc(out, func(a, b cluster.Member) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Placement implements MemberStore.
func (s *MemoryStore) Placement(context.Context) (cluster.Placement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return cluster.Placement{}, ErrClosed
	}
	return s.mu.cluster.placement, nil
}

// SwapPlacement implements MemberStore. The memory store numbers
// placements on their own counter (its feed's revisions count resource
// changes only).
func (s *MemoryStore) SwapPlacement(_ context.Context, prev int64, p cluster.Placement) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	if s.mu.cluster.version != prev {
		return 0, ErrConflict
	}
	s.mu.cluster.version++
	p.Version = s.mu.cluster.version
	p.Members, p.Assignments = slices.Clone(p.Members), slices.Clone(p.Assignments)
	s.mu.cluster.placement = p
	s.broadcastLocked()
	return p.Version, nil
}

// Notify implements MemberStore.
func (s *MemoryStore) Notify(context.Context) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	return s.mu.wake, nil
}

// expireLocked drops the members whose lease has lapsed.
func (s *MemoryStore) expireLocked() {
	now := time.Now()
	n := len(s.mu.cluster.members)
	for id, l := range s.mu.cluster.members {
		if !now.Before(l.expires) {
			delete(s.mu.cluster.members, id)
		}
	}
	if len(s.mu.cluster.members) != n {
		s.leasesChangedLocked()
	}
}

func (s *MemoryStore) leasesChangedLocked() {
	s.broadcastLocked()
	s.scheduleLocked()
}

// scheduleLocked sets the timer to the earliest expiry.
func (s *MemoryStore) scheduleLocked() {
	var first time.Time
	for _, l := range s.mu.cluster.members {
		if first.IsZero() || l.expires.Before(first) {
			first = l.expires
		}
	}
	switch {
	case first.IsZero():
		if s.mu.cluster.timer != nil {
			s.mu.cluster.timer.Stop()
		}
	case s.mu.cluster.timer == nil:
		s.mu.cluster.timer = time.AfterFunc(time.Until(first), s.expireTimer)
	default:
		s.mu.cluster.timer.Reset(time.Until(first))
	}
}

func (s *MemoryStore) expireTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.expireLocked()
		s.scheduleLocked()
	}
}
