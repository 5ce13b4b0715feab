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
	placement cluster.Placement                  // Version: placementVersion
	loads     map[string][]cluster.ShardLoad     // last report by member ID, kept after it leaves
	replicas  map[string][]cluster.ReplicaReport // last replica report by member ID, kept after it leaves
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
	l, err := s.memberLocked(id)
	if err != nil {
		return 0, err
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

// memberLocked returns member id's lease, once lapsed leases are gone.
func (s *MemoryStore) memberLocked(id string) (*memberLease, error) {
	if s.mu.closed {
		return nil, ErrClosed
	}
	s.expireLocked()
	l, ok := s.mu.cluster.members[id]
	if !ok {
		return nil, memberErr(id)
	}
	return l, nil
}

// ReportReplicas implements MemberStore.
func (s *MemoryStore) ReportReplicas(_ context.Context, id string, reports []cluster.ReplicaReport) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.memberLocked(id); err != nil {
		return err
	}
	if prev, ok := s.mu.cluster.replicas[id]; ok && slices.EqualFunc(prev, reports, sameReport) {
		return nil
	}
	if s.mu.cluster.replicas == nil {
		s.mu.cluster.replicas = map[string][]cluster.ReplicaReport{}
	}
	s.mu.cluster.replicas[id] = cloneReports(reports)
	s.broadcastLocked()
	return nil
}

// ReplicaReports implements MemberStore.
func (s *MemoryStore) ReplicaReports(context.Context) (map[string][]cluster.ReplicaReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	out := make(map[string][]cluster.ReplicaReport, len(s.mu.cluster.replicas))
	for id, r := range s.mu.cluster.replicas {
		out[id] = cloneReports(r)
	}
	return out, nil
}

func sameReport(a, b cluster.ReplicaReport) bool {
	return a.Shard == b.Shard && a.Leader == b.Leader && a.Term == b.Term &&
		slices.Equal(a.Voters, b.Voters) && slices.Equal(a.Learners, b.Learners) && slices.Equal(a.InSync, b.InSync)
}

func cloneReports(rs []cluster.ReplicaReport) []cluster.ReplicaReport {
	out := make([]cluster.ReplicaReport, len(rs))
	for i, r := range rs {
		r.Voters, r.Learners, r.InSync = slices.Clone(r.Voters), slices.Clone(r.Learners), slices.Clone(r.InSync)
		out[i] = r
	}
	return out
}

// Leave implements MemberStore.
func (s *MemoryStore) Leave(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.memberLocked(id); err != nil {
		return err
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
