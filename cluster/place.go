package cluster

import (
	"cmp"
	"slices"
	"strings"
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
type ShardSpec struct {
	Shard
	Durable  bool
	Load     int64
	Replicas int
}

func (sp ShardSpec) replicated() bool { return sp.Replicas > 1 }

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
//     of its size in prev keeps the set as it is: its members hold its
//     data, and raft serves it while a majority is up (replacing a member
//     for good is not placement's job). Its absent members stay in
//     Members with Live=false.
//  2. A replicated shard without a set gets Replicas distinct live
//     members (see chooseReplicas: zones first, then the fewest shard
//     copies, where an owned shard and a replica count one each), its
//     preferred leader first; with fewer live members it stays
//     unassigned. New sets are chosen before the single-owner shards are
//     balanced, and then count as pinned shards there (rule 3).
//  3. Every other shard (ephemeral, or durable and never placed) goes to a
//     live member. Shard counts are balanced by water-filling over the
//     pinned counts (durable owners and replicas): max-min <= 1 over live
//     members when nothing is pinned; otherwise a member above min+1 holds
//     only pinned shards.
//  4. Movement is minimal: an ephemeral shard keeps its live previous
//     owner unless that owner is above its balanced count; the +1
//     remainders go to the members that already hold the most, so a leave
//     moves only the leaver's shards and a join moves only as many shards
//     as the newcomer's share.
//  5. Load (ShardSpec.Load; a member's load is the sum over the shards it
//     holds, a replicated shard's counting at each of its replicas)
//     decides only what rules 3 and 4 leave open: among members that hold
//     equally many, the least loaded gets a +1 remainder; and the shards
//     that must be dealt (new, or of a departed member) go heaviest first,
//     each to the least-loaded member still short of its count. Shards of
//     unknown load (0) are then dealt round-robin, starting at the
//     least-loaded member, so one new stream spreads over the members. A
//     placement is a fixed point whatever the loads: recomputing it with
//     the same members and shards moves nothing.
//
// With no live member, shards without a pinned owner are left unassigned.
func Place(prev Placement, members []Member, shards []ShardSpec) Placement {
	st := newPlaceState(prev, members)
	var pool, fresh []ShardSpec
	for _, sp := range sortedSpecs(shards) {
		a, had := st.prev[sp.Shard]
		_, ownerLive := st.live.index[a.Owner]
		switch {
		case sp.replicated() && had && len(a.Replicas) == sp.Replicas:
			st.pin(Assignment{Shard: sp.Shard, Owner: a.Replicas[0], Durable: sp.Durable, Replicas: slices.Clone(a.Replicas)}, sp.Load)
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
	for _, sp := range fresh {
		if set := st.chooseReplicas(sp.Replicas); set != nil {
			st.pin(Assignment{Shard: sp.Shard, Owner: set[0], Durable: sp.Durable, Replicas: set}, sp.Load)
		}
	}
	if len(st.live.list) > 0 {
		st.balance(pool)
	}

	out := Placement{Version: prev.Version, Assignments: st.out}
	out.Members = append(out.Members, st.live.list...)
	for _, m := range st.absent {
		out.Members = append(out.Members, m)
	}
	slices.SortFunc(out.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(out.Assignments, func(a, b Assignment) int { return compareShards(a.Shard, b.Shard) })
	return out
}

// placeState is what Place accumulates while it assigns.
type placeState struct {
	live    memberSet
	known   map[string]Member // prev's members, for absent members' addresses
	prev    map[Shard]Assignment
	out     []Assignment
	pinned  map[string]int         // live member -> shard copies it keeps (durable owners, replicas)
	leaders map[string]int         // member -> replica sets it is the preferred leader of
	load    map[string]int64       // live member -> load of what it holds
	kept    map[string][]ShardSpec // live member -> movable shards it held
	absent  map[string]Member
}

func newPlaceState(prev Placement, members []Member) *placeState {
	st := &placeState{
		live: liveMembers(members), known: map[string]Member{}, prev: make(map[Shard]Assignment, len(prev.Assignments)),
		pinned: map[string]int{}, leaders: map[string]int{}, load: map[string]int64{}, kept: map[string][]ShardSpec{},
		absent: map[string]Member{},
	}
	for _, m := range prev.Members {
		st.known[m.ID] = m
	}
	for _, a := range prev.Assignments {
		st.prev[a.Shard] = a
	}
	return st
}

// pin assigns a shard that does not move: a durable owner's or a replica
// set's. Its members count it as pinned; absent ones are listed with
// Live=false.
func (st *placeState) pin(a Assignment, load int64) {
	st.out = append(st.out, a)
	holders := a.Replicas
	if !a.Replicated() {
		holders = []string{a.Owner}
	} else {
		st.leaders[a.Owner]++
	}
	for _, id := range holders {
		if _, isLive := st.live.index[id]; isLive {
			st.pinned[id]++
			st.load[id] += load
		} else if _, seen := st.absent[id]; !seen {
			m, ok := st.known[id]
			if !ok {
				m = Member{ID: id}
			}
			m.Live = false
			st.absent[id] = m
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
