package cluster

import "slices"

// Index is a Placement with O(1) lookups, for callers that ask per publish
// batch. Build it once per placement version (NewIndex); it is immutable
// and safe for concurrent use. Do not modify the embedded Placement's
// slices: the index would no longer describe them.
type Index struct {
	Placement
	shards  map[Shard]int  // shard -> position in Assignments
	members map[string]int // member ID -> position in Members
	owned   map[string][]Shard
	hosted  map[string][]Shard // member ID -> replicated shards it is a replica of
	held    map[string][]Shard // member ID -> replicated shards it holds (Assignment.Holds)
}

// NewIndex indexes p (it keeps p's slices).
func NewIndex(p Placement) *Index {
	x := &Index{
		Placement: p,
		shards:    make(map[Shard]int, len(p.Assignments)),
		members:   make(map[string]int, len(p.Members)),
		owned:     map[string][]Shard{},
		hosted:    map[string][]Shard{},
		held:      map[string][]Shard{},
	}
	for i, m := range p.Members {
		x.members[m.ID] = i
	}
	for i, a := range p.Assignments {
		x.shards[a.Shard] = i
		x.owned[a.Owner] = append(x.owned[a.Owner], a.Shard)
		for _, id := range a.Replicas {
			x.hosted[id] = append(x.hosted[id], a.Shard)
		}
		for _, id := range slices.Concat(a.Replicas, a.Voters, a.Learners) {
			if hs := x.held[id]; len(hs) == 0 || hs[len(hs)-1] != a.Shard {
				x.held[id] = append(hs, a.Shard)
			}
		}
	}
	return x
}

// Owner returns the member that owns s, as Placement.Owner does: false
// when s is unassigned or its owner is not in Members. A false Live on the
// returned member means the owner is absent (its durable shard is
// unavailable until it returns).
func (x *Index) Owner(s Shard) (Member, bool) {
	i, ok := x.shards[s]
	if !ok {
		return Member{}, false
	}
	a := x.Assignments[i]
	j, ok := x.members[a.Owner]
	if !ok {
		return Member{ID: a.Owner}, false
	}
	return x.Members[j], true
}

// Assignment returns s's assignment.
func (x *Index) Assignment(s Shard) (Assignment, bool) {
	i, ok := x.shards[s]
	if !ok {
		return Assignment{}, false
	}
	return x.Assignments[i], true
}

// Member returns the member with id.
func (x *Index) Member(id string) (Member, bool) {
	i, ok := x.members[id]
	if !ok {
		return Member{}, false
	}
	return x.Members[i], true
}

// Owned returns the shards member id owns, in Assignments order. The slice
// belongs to the index: do not modify it.
func (x *Index) Owned(id string) []Shard { return x.owned[id] }

// Replicas returns the members of s's replica set, the preferred leader
// first: nil when s is unassigned or not replicated. A replica that is not
// in Members comes back as Member{ID: id} (Live false), as Owner's does.
func (x *Index) Replicas(s Shard) []Member {
	i, ok := x.shards[s]
	if !ok || !x.Assignments[i].Replicated() {
		return nil
	}
	ids := x.Assignments[i].Replicas
	out := make([]Member, len(ids))
	for k, id := range ids {
		if j, ok := x.members[id]; ok {
			out[k] = x.Members[j]
		} else {
			out[k] = Member{ID: id}
		}
	}
	return out
}

// ReplicaOf returns the replicated shards whose replica sets hold member
// id, in Assignments order (Owned lists the preferred leader's among
// them too). The slice belongs to the index: do not modify it.
func (x *Index) ReplicaOf(id string) []Shard { return x.hosted[id] }

// HeldBy returns the replicated shards member id holds a replica of or is
// to hold one of (Assignment.Holds), in Assignments order: those of
// ReplicaOf, and those whose reported group still has it (a move away
// from it not finished yet). The slice belongs to the index: do not
// modify it.
func (x *Index) HeldBy(id string) []Shard { return x.held[id] }

// Holds reports whether member id holds (or is to hold) a replica of s:
// false when s is unassigned or not replicated.
func (x *Index) Holds(s Shard, id string) bool {
	a, ok := x.Assignment(s)
	return ok && a.Holds(id)
}

// Moving reports whether s is a replicated shard whose group is not yet
// its target set (Assignment.Moving).
func (x *Index) Moving(s Shard) bool {
	a, ok := x.Assignment(s)
	return ok && a.Moving()
}

// UnderReplicated reports whether s is a replicated shard with fewer
// in-sync voters than replicas (Assignment.UnderReplicated).
func (x *Index) UnderReplicated(s Shard) bool {
	a, ok := x.Assignment(s)
	return ok && a.UnderReplicated()
}

// SameAs reports whether p and q place the same shards on the same members
// with the same addresses and liveness and report the same replica
// groups, whatever their versions.
func (p Placement) SameAs(q Placement) bool {
	return slices.EqualFunc(p.Members, q.Members, Member.Equal) && slices.EqualFunc(p.Assignments, q.Assignments, Assignment.Equal)
}
