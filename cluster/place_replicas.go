package cluster

import (
	"cmp"
	"slices"
	"strings"
)

// chooseReplicas picks the replica set of a new replicated shard: r
// distinct live members, or nil when fewer are live; the preferred leader
// first, the others by ID.
//
// What the set must be comes first, in this order: it spans as many zones
// as it can and spreads evenly over them (members without a zone count as
// one zone), and of those sets it holds the fewest shard copies (pinned,
// plus the single-owner shards each member kept from prev), so that copies
// balance. The preferred leader then balances leaderships: the set is
// built around the member with the fewest preferred leaderships (then the
// fewest copies, then by ID) that such a set can include, and its leader is
// its member with the fewest preferred leaderships (then fewest copies,
// then ID).
//
// Why not the best set first and its least-leading member as leader: a
// member that took copies as a follower while others led is then passed
// over for sets by its copies and never catches up (10 shards of RF=3 on 5
// members led 3/2/2/2/1). For the same reason followers, among equals,
// are the members that lead the most, keeping the others' room for the
// leaderships they lack.
func (st *placeState) chooseReplicas(r int) []string {
	if len(st.live.list) < r {
		return nil
	}
	byLeading := slices.Clone(st.live.list)
	slices.SortFunc(byLeading, func(a, b Member) int { return st.compareLeading(a.ID, b.ID) })
	set := st.fillReplicas(nil, r)
	best := st.setQuality(set)
	for i := range byLeading {
		s := st.fillReplicas(byLeading[i:i+1], r)
		if st.setQuality(s).compare(best) <= 0 {
			set = s
			break
		}
	}
	ids := make([]string, len(set))
	for i, m := range set {
		ids[i] = m.ID
	}
	slices.SortFunc(ids, st.compareLeading)
	slices.Sort(ids[1:])
	return ids
}

// copies is how many shard copies live member id holds so far.
func (st *placeState) copies(id string) int { return st.pinned[id] + len(st.kept[id]) }

// compareLeading orders members by who should lead next: the fewest
// preferred leaderships, then the fewest copies, then by ID.
func (st *placeState) compareLeading(a, b string) int {
	return cmp.Or(cmp.Compare(st.leaders[a], st.leaders[b]), cmp.Compare(st.copies(a), st.copies(b)), strings.Compare(a, b))
}

// fillReplicas adds to taken the best live member left, one at a time,
// until it holds r: the fewest already taken from its zone, then the
// fewest copies, then the most preferred leaderships, then by ID.
func (st *placeState) fillReplicas(taken []Member, r int) []Member {
	taken = slices.Clone(taken)
	inZone := map[string]int{}
	for _, m := range taken {
		inZone[m.Zone]++
	}
	for len(taken) < r {
		var best *Member
		for i := range st.live.list {
			m := &st.live.list[i]
			if slices.ContainsFunc(taken, func(t Member) bool { return t.ID == m.ID }) {
				continue
			}
			if best == nil || cmp.Or(
				cmp.Compare(inZone[m.Zone], inZone[best.Zone]),
				cmp.Compare(st.copies(m.ID), st.copies(best.ID)),
				cmp.Compare(st.leaders[best.ID], st.leaders[m.ID]),
				strings.Compare(m.ID, best.ID),
			) < 0 {
				best = m
			}
		}
		if best == nil {
			return nil
		}
		taken = append(taken, *best)
		inZone[best.Zone]++
	}
	return taken
}

// setQuality is what a replica set must achieve, best first: the most
// zones, the fewest members in its fullest zone, the fewest copies held.
type setQuality struct{ zones, fullest, copies int }

func (st *placeState) setQuality(set []Member) setQuality {
	inZone := map[string]int{}
	var q setQuality
	for _, m := range set {
		inZone[m.Zone]++
		q.fullest = max(q.fullest, inZone[m.Zone])
		q.copies += st.copies(m.ID)
	}
	q.zones = len(inZone)
	return q
}

func (q setQuality) compare(o setQuality) int {
	return cmp.Or(cmp.Compare(o.zones, q.zones), cmp.Compare(q.fullest, o.fullest), cmp.Compare(q.copies, o.copies))
}
