package cluster

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// ShardSpec is one shard to place: its name and whether its stream is
// durable (its data lives on its owner's disk, so it never moves).
//
// Load is the shard's observed publish rate in bytes/s as its owner last
// reported it (0: unknown or idle). It only breaks ties that shard counts
// leave open (see Place); it never makes a shard move by itself.
//
// Replicas is the stream's replication factor: above 1, the shard is
// placed on that many members (a replica set) instead of one owner; 0 and
// 1 mean not replicated. The control plane allows it for durable streams
// only.
//
// Voters, Learners and InSync are a replicated shard's raft group as its
// leader last reported it; nil Voters: no report, and the previous
// placement's stay.
type ShardSpec struct {
	Shard
	Durable  bool
	Load     int64
	Replicas int
	Voters   []string
	Learners []string
	InSync   []string
}

func (sp ShardSpec) replicated() bool { return sp.Replicas > 1 }

// Rules are the settings of the rules that change replica sets once
// chosen (see Rules.Place). The zero value changes none: no replacement,
// no rebalancing, no DownSince.
type Rules struct {
	// Now is the time of the computation: members found absent from now
	// on get it as their DownSince.
	Now time.Time
	// ReplaceAfter is how long a replica set's member may be absent
	// before it is replaced; 0 never replaces.
	ReplaceAfter time.Duration
	// MaxMoves bounds the replicated shards moving at once, cluster-wide,
	// that rebalancing may start moves up to; 0 never rebalances.
	MaxMoves int
}

// Place is Rules{}.Place: the placement rules without replacement or
// rebalancing.
func Place(prev Placement, members []Member, shards []ShardSpec) Placement {
	return Rules{}.Place(prev, members, shards)
}

// Place computes the placement of shards over the live members, starting
// from prev. It is pure and deterministic: equal inputs (in any order)
// give equal outputs, so several control planes computing it from one
// store agree. The result's Version is prev's; the store that writes it
// sets the new one.
//
// Rules, in order:
//  1. A durable shard that has an owner in prev keeps it, live or not: its
//     data is on that broker's disk. An owner that is not in members stays
//     in the result's Members with Live=false (its address from prev), and
//     publishes to its shards fail with "owner unavailable" until it
//     registers again. Likewise a replicated shard that has a replica set
//     of its size in prev keeps the set: its members hold its data, and
//     raft serves it while a majority is up. Its absent members stay in
//     Members with Live=false and DownSince.
//  2. Replace: a member of a kept replica set that has been absent for
//     r.ReplaceAfter is replaced by a live member not in the set, chosen
//     as a new set's members are (rule 3's order); if it was the
//     preferred leader, the set's live member leading the fewest becomes
//     it.
//  3. A replicated shard without a set gets Replicas distinct live
//     members (see chooseReplicas: zones first, then the fewest shard
//     copies, where an owned shard and a replica count one each), its
//     preferred leader first; with fewer live members it stays
//     unassigned. New sets are chosen before the single-owner shards are
//     balanced, and then count as pinned shards there (rule 5).
//  4. Rebalance (see rebalance): while the replicas per live member
//     differ by more than one and fewer than r.MaxMoves shards are
//     moving, one replica of a settled shard (not moving, every member
//     live and reported in sync) moves from a member holding the most to
//     one holding the fewest, keeping the set's zone spread. Then, while
//     the preferred leaderships of two members of a settled set differ by
//     more than one, the one leading more hands that set's to the other.
//  5. Every other shard (ephemeral, or durable and never placed) goes to a
//     live member. Shard counts are balanced by water-filling over the
//     pinned counts (durable owners and replicas): max-min <= 1 over live
//     members when nothing is pinned; otherwise a member above min+1 holds
//     only pinned shards.
//  6. Movement is minimal: an ephemeral shard keeps its live previous
//     owner unless that owner is above its balanced count; the +1
//     remainders go to the members that already hold the most, so a leave
//     moves only the leaver's shards and a join moves only as many shards
//     as the newcomer's share.
//  7. Load (ShardSpec.Load; a member's load is the sum over the shards it
//     holds, a replicated shard's counting at each of its replicas)
//     decides only what rules 5 and 6 leave open: among members that hold
//     equally many, the least loaded gets a +1 remainder; and the shards
//     that must be dealt (new, or of a departed member) go heaviest first,
//     each to the least-loaded member still short of its count. Shards of
//     unknown load (0) are then dealt round-robin, starting at the
//     least-loaded member, so one new stream spreads over the members. A
//     placement is a fixed point whatever the loads: recomputing it with
//     the same members and shards moves nothing.
//
// A replicated shard's assignment carries the group its leader reported
// (ShardSpec.Voters, Learners, InSync), or prev's without a report.
// With no live member, shards without a pinned owner are left unassigned.
func (r Rules) Place(prev Placement, members []Member, shards []ShardSpec) Placement {
	st := newPlaceState(prev, members, r.Now)
	var pool, fresh []ShardSpec
	var sets []int // positions in st.out of the replica sets
	for _, sp := range sortedSpecs(shards) {
		a, had := st.prev[sp.Shard]
		_, ownerLive := st.live.index[a.Owner]
		switch {
		case sp.replicated() && had && len(a.Replicas) == sp.Replicas:
			sets = append(sets, len(st.out))
			st.pin(withGroup(Assignment{Shard: sp.Shard, Owner: a.Replicas[0], Durable: sp.Durable, Replicas: slices.Clone(a.Replicas)}, a, sp), sp.Load)
		case sp.replicated():
			fresh = append(fresh, sp)
		case had && sp.Durable:
			st.pin(Assignment{Shard: sp.Shard, Owner: a.Owner, Durable: true}, sp.Load)
		case had && ownerLive:
			st.kept[a.Owner] = append(st.kept[a.Owner], sp)
			st.load[a.Owner] += sp.Load
		default:
			pool = append(pool, sp)
		}
	}
	st.replace(sets, r)
	for _, sp := range fresh {
		if set := st.chooseReplicas(sp.Replicas); set != nil {
			sets = append(sets, len(st.out))
			st.pin(withGroup(Assignment{Shard: sp.Shard, Owner: set[0], Durable: sp.Durable, Replicas: set}, Assignment{}, sp), sp.Load)
		}
	}
	st.rebalance(sets, r.MaxMoves)
	if len(st.live.list) > 0 {
		st.balance(pool)
	}

	out := Placement{Version: prev.Version, Assignments: st.out}
	out.Members = append(out.Members, st.live.list...)
	out.Members = append(out.Members, st.absentMembers()...)
	slices.SortFunc(out.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(out.Assignments, func(a, b Assignment) int { return compareShards(a.Shard, b.Shard) })
	return out
}

// withGroup gives a the raft group sp reports, or else prev's.
func withGroup(a, prev Assignment, sp ShardSpec) Assignment {
	if sp.Voters == nil {
		a.Voters, a.Learners, a.InSync = prev.Voters, prev.Learners, prev.InSync
		return a
	}
	sorted := func(ids []string) []string {
		if len(ids) == 0 {
			return nil
		}
		return slices.Sorted(slices.Values(ids))
	}
	a.Voters, a.Learners, a.InSync = sorted(sp.Voters), sorted(sp.Learners), sorted(sp.InSync)
	return a
}

// placeState is what Place accumulates while it assigns.
type placeState struct {
	live      memberSet
	known     map[string]Member // prev's members, for absent members' addresses and zones
	prev      map[Shard]Assignment
	now       time.Time
	out       []Assignment
	pinned    map[string]int         // live member -> shard copies it keeps (durable owners, replicas)
	leaders   map[string]int         // member -> replica sets it is the preferred leader of
	load      map[string]int64       // live member -> load of what it holds
	shardLoad map[Shard]int64        // pinned shard -> its load
	kept      map[string][]ShardSpec // live member -> movable shards it held
}

func newPlaceState(prev Placement, members []Member, now time.Time) *placeState {
	st := &placeState{
		live: liveMembers(members), known: map[string]Member{}, prev: make(map[Shard]Assignment, len(prev.Assignments)), now: now,
		pinned: map[string]int{}, leaders: map[string]int{}, load: map[string]int64{}, shardLoad: map[Shard]int64{},
		kept: map[string][]ShardSpec{},
	}
	for _, m := range prev.Members {
		st.known[m.ID] = m
	}
	for _, a := range prev.Assignments {
		st.prev[a.Shard] = a
	}
	return st
}

// isLive reports whether member id is live.
func (st *placeState) isLive(id string) bool {
	_, ok := st.live.index[id]
	return ok
}

// member returns member id: live, or absent (Live=false) with its address
// and zone from prev and the time it has been absent since.
func (st *placeState) member(id string) Member {
	if i, ok := st.live.index[id]; ok {
		return st.live.list[i]
	}
	m, ok := st.known[id]
	if !ok {
		m = Member{ID: id}
	}
	if m.Live || m.DownSince.IsZero() {
		m.DownSince = time.Time{}
		if !st.now.IsZero() {
			// Without a monotonic reading or a location: equal to itself
			// after a JSON round trip.
			m.DownSince = st.now.UTC().Round(0)
		}
	}
	m.Live = false
	return m
}

// absentMembers lists the members that are not live but hold a shard of
// the result: a durable shard's owner, a replica set's member, a voter or
// learner of a reported group.
func (st *placeState) absentMembers() []Member {
	seen := map[string]bool{}
	var out []Member
	for _, a := range st.out {
		for _, id := range slices.Concat([]string{a.Owner}, a.Replicas, a.Voters, a.Learners) {
			if !st.isLive(id) && !seen[id] {
				seen[id] = true
				out = append(out, st.member(id))
			}
		}
	}
	return out
}

// pin assigns a shard that does not move: a durable owner's or a replica
// set's. Its live members count it as pinned.
func (st *placeState) pin(a Assignment, load int64) {
	st.out = append(st.out, a)
	st.shardLoad[a.Shard] = load
	st.count(a, 1)
}

// count adds d times a's copies to its live members' pinned counts and
// loads, and a replica set's preferred leadership to its leader.
func (st *placeState) count(a Assignment, d int) {
	holders := a.Replicas
	if !a.Replicated() {
		holders = []string{a.Owner}
	} else {
		st.leaders[a.Owner] += d
	}
	for _, id := range holders {
		if st.isLive(id) {
			st.pinned[id] += d
			st.load[id] += int64(d) * st.shardLoad[a.Shard]
		}
	}
}

// balance assigns the movable shards (those kept from prev and the pool)
// over the live members, around the pinned ones.
func (st *placeState) balance(pool []ShardSpec) {
	movable := len(pool)
	for _, ks := range st.kept {
		movable += len(ks)
	}
	targets := waterFill(st.live.list, st.pinned, st.kept, st.load, movable)
	// Members above their target release their last shards (in shard
	// order) to the pool.
	for _, m := range st.live.list {
		ks := st.kept[m.ID]
		if n := targets[m.ID] - st.pinned[m.ID]; len(ks) > n {
			for _, sp := range ks[n:] {
				st.load[m.ID] -= sp.Load
			}
			pool = append(pool, ks[n:]...)
			st.kept[m.ID] = ks[:n]
		}
		for _, sp := range st.kept[m.ID] {
			st.out = append(st.out, Assignment{Shard: sp.Shard, Owner: m.ID, Durable: sp.Durable})
		}
	}
	st.out = append(st.out, deal(pool, st.live.list, st.load, func(m Member) int {
		return targets[m.ID] - st.pinned[m.ID] - len(st.kept[m.ID])
	})...)
}

// deal gives the pool's shards to the members that are short of their
// target (want). Shards of known load go first, heaviest first (then in
// shard order), each to the least-loaded member with room (then by ID);
// load is each member's load so far and is updated. The shards of unknown
// load follow in shard order, round-robin over the members with room from
// the least loaded (then by ID), so that the shards of one new stream
// spread over the members instead of filling one after another.
func deal(pool []ShardSpec, members []Member, load map[string]int64, want func(Member) int) []Assignment {
	slices.SortFunc(pool, func(a, b ShardSpec) int {
		return cmp.Or(cmp.Compare(b.Load, a.Load), compareShards(a.Shard, b.Shard))
	})
	short := map[string]int{}
	for _, m := range members {
		short[m.ID] = want(m)
	}
	byLoad := func() []Member {
		ms := slices.Clone(members)
		slices.SortFunc(ms, func(a, b Member) int {
			return cmp.Or(cmp.Compare(load[a.ID], load[b.ID]), strings.Compare(a.ID, b.ID))
		})
		return ms
	}
	out := make([]Assignment, 0, len(pool))
	for len(pool) > 0 && pool[0].Load > 0 {
		ms := byLoad()
		i := slices.IndexFunc(ms, func(m Member) bool { return short[m.ID] > 0 })
		if i < 0 {
			panic("cluster: placement targets do not add up to the shards")
		}
		id := ms[i].ID
		short[id]--
		load[id] += pool[0].Load
		out = append(out, Assignment{Shard: pool[0].Shard, Owner: id, Durable: pool[0].Durable})
		pool = pool[1:]
	}
	order := byLoad()
	for i, idle := 0, 0; len(pool) > 0; i = (i + 1) % len(order) {
		id := order[i].ID
		if short[id] == 0 {
			if idle++; idle > len(order) {
				panic("cluster: placement targets do not add up to the shards")
			}
			continue
		}
		idle = 0
		short[id]--
		out = append(out, Assignment{Shard: pool[0].Shard, Owner: id, Durable: pool[0].Durable})
		pool = pool[1:]
	}
	return out
}

// waterFill returns each live member's target shard count: the counts that
// minimise the maximum given the pinned shards, with the movable shards on
// top. The remainders (members at level+1) go to the members that hold the
// most already (pinned plus kept), so that as few shards move as possible,
// then to the least loaded, then by ID.
func waterFill(live []Member, pinned map[string]int, kept map[string][]ShardSpec, load map[string]int64, movable int) map[string]int {
	// fill(l) is how many movable shards raise every member to at least l.
	fill := func(level int) int {
		n := 0
		for _, m := range live {
			n += max(0, level-pinned[m.ID])
		}
		return n
	}
	// The highest level that the movable shards can fill completely.
	lo, hi := 0, movable+1
	for _, m := range live {
		hi = max(hi, pinned[m.ID]+movable+1)
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if fill(mid) <= movable {
			lo = mid
		} else {
			hi = mid
		}
	}
	level, rest := lo, movable-fill(lo)
	targets := make(map[string]int, len(live))
	var atLevel []Member
	for _, m := range live {
		targets[m.ID] = max(level, pinned[m.ID])
		if pinned[m.ID] <= level {
			atLevel = append(atLevel, m)
		}
	}
	held := func(m Member) int { return pinned[m.ID] + len(kept[m.ID]) }
	slices.SortFunc(atLevel, func(a, b Member) int {
		return cmp.Or(cmp.Compare(held(b), held(a)), cmp.Compare(load[a.ID], load[b.ID]), strings.Compare(a.ID, b.ID))
	})
	for _, m := range atLevel[:rest] {
		targets[m.ID]++
	}
	return targets
}

// memberSet is the live members sorted by ID, without duplicates (the
// last entry of an ID wins).
type memberSet struct {
	list  []Member
	index map[string]int
}

func liveMembers(members []Member) memberSet {
	byID := map[string]Member{}
	for _, m := range members {
		m.Live = true
		byID[m.ID] = m
	}
	s := memberSet{index: make(map[string]int, len(byID))}
	for _, m := range byID {
		s.list = append(s.list, m)
	}
	slices.SortFunc(s.list, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	for i, m := range s.list {
		s.index[m.ID] = i
	}
	return s
}

// sortedSpecs returns the shards sorted, without duplicates (durable wins
// if a shard is listed both ways, then the highest load, then the most
// replicas).
func sortedSpecs(shards []ShardSpec) []ShardSpec {
	out := slices.Clone(shards)
	slices.SortFunc(out, func(a, b ShardSpec) int {
		if c := compareShards(a.Shard, b.Shard); c != 0 {
			return c
		}
		if a.Durable != b.Durable {
			if a.Durable {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Load, a.Load), cmp.Compare(b.Replicas, a.Replicas))
	})
	return slices.CompactFunc(out, func(a, b ShardSpec) bool { return a.Shard == b.Shard })
}

func compareShards(a, b Shard) int {
	return cmp.Or(
		strings.Compare(a.Tenant, b.Tenant),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Stream, b.Stream),
		cmp.Compare(a.Shard, b.Shard),
	)
}
