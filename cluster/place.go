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
type ShardSpec struct {
	Shard
	Durable bool
	Load    int64
}

// Place computes the placement of shards over the live members, starting
// from prev. It is pure and deterministic: equal inputs (in any order)
// give equal outputs, so several control planes computing it from one
// store agree. The result's Version is prev's; the store that writes it
// sets the new one.
//
// Rules, in order:
//  1. A durable shard that has an owner in prev keeps it, live or not: its
//     data is on that broker's disk and there is no replication. An owner
//     that is not in members stays in the result's Members with Live=false
//     (its address from prev), and publishes to its shards fail with
//     "owner unavailable" until it registers again.
//  2. Every other shard (ephemeral, or durable and never placed) goes to a
//     live member. Shard counts are balanced by water-filling over the
//     pinned counts: max-min <= 1 over live members when nothing is pinned;
//     otherwise a member above min+1 holds only pinned shards.
//  3. Movement is minimal: an ephemeral shard keeps its live previous
//     owner unless that owner is above its balanced count; the +1
//     remainders go to the members that already hold the most, so a leave
//     moves only the leaver's shards and a join moves only as many shards
//     as the newcomer's share.
//  4. Load (ShardSpec.Load; a member's load is the sum over the shards it
//     holds) decides only what rules 2 and 3 leave open: among members
//     that hold equally many, the least loaded gets a +1 remainder; and the
//     shards that must be dealt (new, or of a departed member) go heaviest
//     first, each to the least-loaded member still short of its count.
//     Shards of unknown load (0) are then dealt round-robin, starting at
//     the least-loaded member, so one new stream spreads over the members.
//     A placement is a fixed point whatever the loads: recomputing it with
//     the same members and shards moves nothing.
//
// With no live member, shards without a pinned owner are left unassigned.
func Place(prev Placement, members []Member, shards []ShardSpec) Placement {
	live := liveMembers(members)
	known := map[string]Member{}
	for _, m := range prev.Members {
		known[m.ID] = m
	}
	prevOwner := make(map[Shard]string, len(prev.Assignments))
	for _, a := range prev.Assignments {
		prevOwner[a.Shard] = a.Owner
	}
	specs := sortedSpecs(shards)

	out := Placement{Version: prev.Version}
	pinned := map[string]int{}       // live member -> durable shards it keeps
	load := map[string]int64{}       // live member -> load of what it holds
	kept := map[string][]ShardSpec{} // live member -> movable shards it held
	absent := map[string]Member{}
	var pool []ShardSpec
	for _, sp := range specs {
		owner, had := prevOwner[sp.Shard]
		_, isLive := live.index[owner]
		switch {
		case had && sp.Durable:
			out.Assignments = append(out.Assignments, Assignment{Shard: sp.Shard, Owner: owner, Durable: true})
			if isLive {
				pinned[owner]++
				load[owner] += sp.Load
			} else if _, seen := absent[owner]; !seen {
				m, ok := known[owner]
				if !ok {
					m = Member{ID: owner}
				}
				m.Live = false
				absent[owner] = m
			}
		case had && isLive:
			kept[owner] = append(kept[owner], sp)
			load[owner] += sp.Load
		default:
			pool = append(pool, sp)
		}
	}

	if len(live.list) > 0 {
		movable := len(pool)
		for _, ks := range kept {
			movable += len(ks)
		}
		targets := waterFill(live.list, pinned, kept, load, movable)
		// Members above their target release their last shards (in shard
		// order) to the pool.
		for _, m := range live.list {
			ks := kept[m.ID]
			if n := targets[m.ID] - pinned[m.ID]; len(ks) > n {
				for _, sp := range ks[n:] {
					load[m.ID] -= sp.Load
				}
				pool = append(pool, ks[n:]...)
				kept[m.ID] = ks[:n]
			}
			for _, sp := range kept[m.ID] {
				out.Assignments = append(out.Assignments, Assignment{Shard: sp.Shard, Owner: m.ID, Durable: sp.Durable})
			}
		}
		out.Assignments = append(out.Assignments, deal(pool, live.list, load, func(m Member) int {
			return targets[m.ID] - pinned[m.ID] - len(kept[m.ID])
		})...)
	}

	out.Members = append(out.Members, live.list...)
	for _, m := range absent {
		out.Members = append(out.Members, m)
	}
	slices.SortFunc(out.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(out.Assignments, func(a, b Assignment) int { return compareShards(a.Shard, b.Shard) })
	return out
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
// if a shard is listed both ways, then the highest load).
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
		return cmp.Compare(b.Load, a.Load)
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
