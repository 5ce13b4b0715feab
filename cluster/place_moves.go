package cluster

import (
	"fmt"
	"slices"
	"time"
)

// replace applies Place's rule 2 to the replica sets at positions sets of
// st.out: each member absent for r.ReplaceAfter is replaced.
func (st *placeState) replace(sets []int, r Rules) {
	if r.ReplaceAfter <= 0 || r.Now.IsZero() {
		return
	}
	expired := func(id string) bool { return !st.isLive(id) && r.Now.Sub(st.member(id).DownSince) >= r.ReplaceAfter }
	for _, i := range sets {
		for {
			a := st.out[i]
			k := slices.IndexFunc(a.Replicas, expired)
			if k < 0 {
				break
			}
			dead := a.Replicas[k]
			var others []Member
			for _, id := range a.Replicas {
				if id != dead {
					others = append(others, st.member(id))
				}
			}
			filled := st.fillReplicas(others, len(a.Replicas))
			if filled == nil {
				break // every live member is in the set already
			}
			leader := a.Replicas[0]
			if k == 0 {
				leader = "" // the live member leading the fewest
			}
			st.retarget(i, swapID(a.Replicas, dead, filled[len(filled)-1].ID), leader)
		}
	}
}

// rebalance applies Place's rule 4 to the replica sets at positions sets
// of st.out.
func (st *placeState) rebalance(sets []int, maxMoves int) {
	if maxMoves <= 0 {
		return
	}
	moving := 0
	for _, i := range sets {
		if st.out[i].Moving() {
			moving++
		}
	}
	for ; moving < maxMoves; moving++ {
		m, ok := st.bestMove(sets)
		if !ok {
			break
		}
		a := st.out[m.set]
		leader := a.Replicas[0]
		if m.from == leader {
			leader = "" // the live member leading the fewest
		}
		st.retarget(m.set, swapID(a.Replicas, m.from, m.to), leader)
	}
	st.balanceLeaders(sets)
}

// balanceLeaders hands preferred leaderships over while they differ by
// more than one between two members of a settled set: from its preferred
// leader to the member of it that leads the fewest, the largest
// difference first (then the first set). No data moves: raft transfers
// the leadership once the new preferred leader is caught up.
func (st *placeState) balanceLeaders(sets []int) {
	for {
		best, to, gain := -1, "", 1
		for _, i := range sets {
			a := st.out[i]
			if !st.settled(a) {
				continue
			}
			for _, id := range a.Replicas[1:] {
				if g := st.leaders[a.Replicas[0]] - st.leaders[id]; g > gain {
					best, to, gain = i, id, g
				}
			}
		}
		if best < 0 {
			return
		}
		st.retarget(best, st.out[best].Replicas, to)
	}
}

// move is one replica move rebalance may make: in the set at st.out[set],
// from's replica goes to to, which holds gain fewer replicas.
type move struct {
	set      int
	from, to string
	gain     int
	follower bool // from is not the preferred leader
}

// bestMove returns the move between the members whose replica counts
// differ the most (at least 2), of a settled shard, that keeps the set's
// zone spread; among equals, one that takes a follower's replica (its
// leader stays put), then the first shard, then by IDs.
func (st *placeState) bestMove(sets []int) (move, bool) {
	held := map[string]int{}
	for _, i := range sets {
		for _, id := range st.out[i].Replicas {
			held[id]++
		}
	}
	var best move
	found := false
	for _, i := range sets {
		a := st.out[i]
		if !st.settled(a) {
			continue
		}
		for k, from := range a.Replicas {
			for _, to := range st.live.list {
				gain := held[from] - held[to.ID]
				if gain < 2 || slices.Contains(a.Replicas, to.ID) || !st.keepsZones(a.Replicas, swapID(a.Replicas, from, to.ID)) {
					continue
				}
				c := move{set: i, from: from, to: to.ID, gain: gain, follower: k > 0}
				if !found || c.gain > best.gain || c.gain == best.gain && c.follower && !best.follower {
					best, found = c, true
				}
			}
		}
	}
	return best, found
}

// settled reports whether a replica set may be moved: its group is its
// target set, every member of it is live and reported in sync.
func (st *placeState) settled(a Assignment) bool {
	return a.Voters != nil && !a.Moving() && a.AllInSync() && !slices.ContainsFunc(a.Replicas, func(id string) bool { return !st.isLive(id) })
}

// keepsZones reports whether set next spans as many zones as set prev
// and is no more crowded in its fullest zone.
func (st *placeState) keepsZones(prev, next []string) bool {
	q := func(ids []string) setQuality {
		ms := make([]Member, len(ids))
		for i, id := range ids {
			ms[i] = st.member(id)
		}
		return st.setQuality(ms)
	}
	p, n := q(prev), q(next)
	return n.zones >= p.zones && n.fullest <= p.fullest
}

// retarget makes set the replicas of st.out[i], leader first (""
// chooses the set's live member that should lead next, compareLeading),
// the followers by ID, and recounts.
func (st *placeState) retarget(i int, set []string, leader string) {
	a := &st.out[i]
	st.count(*a, -1)
	if leader == "" {
		for _, id := range set {
			if st.isLive(id) && (leader == "" || st.compareLeading(id, leader) < 0) {
				leader = id
			}
		}
		if leader == "" {
			leader = slices.Min(set)
		}
	}
	a.Replicas, a.Owner = leaderFirst(set, leader), leader
	st.count(*a, 1)
}

// leaderFirst returns set with leader first and the others by ID.
func leaderFirst(set []string, leader string) []string {
	rest := slices.DeleteFunc(slices.Clone(set), func(id string) bool { return id == leader })
	slices.Sort(rest)
	return append([]string{leader}, rest...)
}

// swapID returns a copy of ids with from replaced by to.
func swapID(ids []string, from, to string) []string {
	out := slices.Clone(ids)
	if i := slices.Index(out, from); i >= 0 {
		out[i] = to
	}
	return out
}

// NextReplace returns the earliest time after r.Now at which a member of
// one of p's replica sets will have been absent for r.ReplaceAfter (the
// time rule 2 next applies without any other change), and false when
// none will.
func (r Rules) NextReplace(p Placement) (time.Time, bool) {
	if r.ReplaceAfter <= 0 {
		return time.Time{}, false
	}
	x := NewIndex(p)
	var next time.Time
	for _, m := range p.Members {
		if m.Live || m.DownSince.IsZero() || len(x.ReplicaOf(m.ID)) == 0 {
			continue
		}
		if t := m.DownSince.Add(r.ReplaceAfter); t.After(r.Now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next, !next.IsZero()
}

// MoveReplica returns p with the replica of shard s on member from moved
// to member to: to takes from's place in Replicas (the preferred leader's,
// if from held it), and the shard's group follows (to joins as a learner,
// from leaves once to is caught up). It is refused with ErrNoShard when s
// is not a replicated shard of p, ErrShardMoving while s's group has not
// caught up with its previous target, and ErrBadMove unless from is in the
// set and to is a live member outside it.
func (p Placement) MoveReplica(s Shard, from, to string) (Placement, error) {
	x := NewIndex(p)
	a, err := replicatedAssignment(x, s)
	if err != nil {
		return p, err
	}
	switch m, ok := x.Member(to); {
	case a.Moving():
		return p, refuse(ErrShardMoving, s, "its group (voters %v, learners %v) has not reached its replicas %v yet", a.Voters, a.Learners, a.Replicas)
	case !slices.Contains(a.Replicas, from):
		return p, refuse(ErrBadMove, s, "%q is not one of its replicas %v", from, a.Replicas)
	case slices.Contains(a.Replicas, to):
		return p, refuse(ErrBadMove, s, "%q is one of its replicas %v already", to, a.Replicas)
	case !ok || !m.Live:
		return p, refuse(ErrBadMove, s, "%q is not a live member", to)
	}
	leader := a.Replicas[0]
	if leader == from {
		leader = to
	}
	return p.withReplicas(s, leaderFirst(swapID(a.Replicas, from, to), leader)), nil
}

// PreferLeader returns p with member to the preferred leader of shard s
// (Replicas[0]; its group's leader hands leadership to it once it is
// caught up). It is refused with ErrNoShard when s is not a replicated
// shard of p, and ErrBadMove unless to is a live member of the set.
func (p Placement) PreferLeader(s Shard, to string) (Placement, error) {
	x := NewIndex(p)
	a, err := replicatedAssignment(x, s)
	if err != nil {
		return p, err
	}
	switch m, ok := x.Member(to); {
	case !slices.Contains(a.Replicas, to):
		return p, refuse(ErrBadMove, s, "%q is not one of its replicas %v", to, a.Replicas)
	case !ok || !m.Live:
		return p, refuse(ErrBadMove, s, "%q is not a live member", to)
	}
	return p.withReplicas(s, leaderFirst(a.Replicas, to)), nil
}

func replicatedAssignment(x *Index, s Shard) (Assignment, error) {
	a, ok := x.Assignment(s)
	if !ok || !a.Replicated() {
		return a, refuse(ErrNoShard, s, "")
	}
	return a, nil
}

func refuse(err error, s Shard, format string, args ...any) error {
	return &ChangeError{Err: err, Shard: s, Reason: fmt.Sprintf(format, args...)}
}

// withReplicas returns a copy of p in which s's replicas are set, its
// preferred leader first.
func (p Placement) withReplicas(s Shard, set []string) Placement {
	p.Assignments = slices.Clone(p.Assignments)
	for i := range p.Assignments {
		if a := &p.Assignments[i]; a.Shard == s {
			a.Replicas, a.Owner = set, set[0]
		}
	}
	return p
}
