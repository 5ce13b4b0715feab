package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func members(ids ...string) []Member {
	out := make([]Member, 0, len(ids))
	for _, id := range ids {
		out = append(out, Member{ID: id, QUICAddr: id + ":7000"})
	}
	return out
}

// stream returns the n shards of stream name in t/ns.
func stream(name string, n int, durable bool) []ShardSpec {
	out := make([]ShardSpec, n)
	for i := range out {
		out[i] = ShardSpec{Shard: Shard{"t", "ns", name, i}, Durable: durable}
	}
	return out
}

// counts returns each member's number of shards (members with none
// included).
func counts(p Placement) map[string]int {
	c := map[string]int{}
	for _, m := range p.Members {
		c[m.ID] += 0
	}
	for _, a := range p.Assignments {
		c[a.Owner]++
	}
	return c
}

// moved counts the shards whose owner differs between a and b.
func moved(a, b Placement) int {
	n := 0
	ia := NewIndex(a)
	for _, x := range b.Assignments {
		if y, ok := ia.Assignment(x.Shard); ok && y.Owner != x.Owner {
			n++
		}
	}
	return n
}

func TestPlaceTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prev    []string // members of the first placement
		next    []string // members of the second
		shards  []ShardSpec
		counts  map[string]int // after the second
		moved   int
		absent  []string
		unowned int
	}{
		{name: "12 shards on 3 brokers are 4/4/4", prev: []string{"a", "b", "c"}, next: []string{"a", "b", "c"},
			shards: stream("s", 12, false), counts: map[string]int{"a": 4, "b": 4, "c": 4}},
		{name: "join moves only the newcomer's share", prev: []string{"a", "b", "c"}, next: []string{"a", "b", "c", "d"},
			shards: stream("s", 12, false), counts: map[string]int{"a": 3, "b": 3, "c": 3, "d": 3}, moved: 3},
		{name: "ephemeral leave moves only the leaver's shards", prev: []string{"a", "b", "c"}, next: []string{"a", "c"},
			shards: stream("s", 12, false), counts: map[string]int{"a": 6, "c": 6}, moved: 4},
		{name: "durable shards stay with an absent owner", prev: []string{"a", "b", "c"}, next: []string{"a", "c"},
			shards: stream("d", 12, true), counts: map[string]int{"a": 4, "b": 4, "c": 4}, absent: []string{"b"}},
		{name: "durable shards do not move to a newcomer", prev: []string{"a"}, next: []string{"a", "b"},
			shards: slices.Concat(stream("d", 4, true), stream("e", 6, false)), counts: map[string]int{"a": 5, "b": 5}, moved: 5},
		{name: "pinned shards above the level leave the rest balanced", prev: []string{"a"}, next: []string{"a", "b", "c"},
			shards: slices.Concat(stream("d", 8, true), stream("e", 4, false)), counts: map[string]int{"a": 8, "b": 2, "c": 2}, moved: 4},
		{name: "no live member: ephemeral unassigned, durable kept", prev: []string{"a"}, next: nil,
			shards: slices.Concat(stream("d", 2, true), stream("e", 3, false)), counts: map[string]int{"a": 2}, absent: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := Place(Placement{}, members(tc.prev...), tc.shards)
			second := Place(first, members(tc.next...), tc.shards)
			require.Equal(t, tc.counts, counts(second))
			require.Equal(t, tc.moved, moved(first, second))
			var absent []string
			for _, m := range second.Members {
				if !m.Live {
					absent = append(absent, m.ID)
					require.Equal(t, m.ID+":7000", m.QUICAddr, "an absent owner keeps its address")
				}
			}
			require.Equal(t, tc.absent, absent)
			require.Len(t, second.Assignments, len(tc.shards)-tc.unowned-unassigned(tc.next, tc.shards))
			// Recomputing from the result changes nothing (stable).
			require.True(t, second.SameAs(Place(second, members(tc.next...), tc.shards)))
		})
	}
}

// unassigned is how many shards a placement with no live member leaves
// without an owner (the ephemeral ones).
func unassigned(live []string, shards []ShardSpec) int {
	if len(live) > 0 {
		return 0
	}
	n := 0
	for _, s := range shards {
		if !s.Durable {
			n++
		}
	}
	return n
}

// Equal inputs in any order give equal placements.
func TestPlaceDeterministic(t *testing.T) {
	ms := members("c", "a", "b", "d")
	shards := slices.Concat(stream("x", 7, false), stream("y", 5, true))
	p1 := Place(Placement{}, ms, shards)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		ms2, sh2 := slices.Clone(ms), slices.Clone(shards)
		r.Shuffle(len(ms2), func(i, j int) { ms2[i], ms2[j] = ms2[j], ms2[i] })
		r.Shuffle(len(sh2), func(i, j int) { sh2[i], sh2[j] = sh2[j], sh2[i] })
		require.Equal(t, p1, Place(Placement{}, ms2, sh2))
	}
}

// Random joins, leaves and stream creations: every shard is placed, the
// balance bound holds, a leave moves only the leaver's ephemeral shards, a
// join moves at most the newcomer's share, and durable shards never move.
// With random loads (changing at every step) too, and then recomputing
// with other loads moves nothing.
func TestPlaceProperties(t *testing.T) {
	t.Run("unloaded", func(t *testing.T) { placeProperties(t, false) })
	t.Run("loaded", func(t *testing.T) { placeProperties(t, true) })
}

// randomLoads gives about half the shards a random load.
func randomLoads(r *rand.Rand, shards []ShardSpec) []ShardSpec {
	out := slices.Clone(shards)
	for i := range out {
		if r.IntN(2) == 0 {
			out[i].Load = r.Int64N(1000)
		}
	}
	return out
}

func placeProperties(t *testing.T, loaded bool) {
	r := rand.New(rand.NewPCG(9, 9))
	for run := range 200 {
		live := map[string]bool{}
		var shards []ShardSpec
		var p Placement
		for step := range 30 {
			var joined, left string
			switch op := r.IntN(4); {
			case op == 0 || len(live) == 0:
				joined = fmt.Sprintf("m%d", r.IntN(8))
				if live[joined] {
					joined = ""
				}
				live[joined] = true
			case op == 1:
				left = pick(r, live)
				delete(live, left)
			default:
				shards = append(shards, stream(fmt.Sprintf("s%d", step), 1+r.IntN(12), r.IntN(3) == 0)...)
			}
			delete(live, "")
			var ms []string
			for id := range live {
				ms = append(ms, id)
			}
			in := shards
			if loaded {
				in = randomLoads(r, shards)
			}
			next := Place(p, members(ms...), in)
			msg := fmt.Sprintf("run %d step %d joined %q left %q", run, step, joined, left)
			checkPlacement(t, msg, p, next, live, shards)
			if loaded {
				require.True(t, next.SameAs(Place(next, members(ms...), randomLoads(r, shards))), "%s: loads alone moved shards", msg)
			}
			if left != "" && len(live) > 0 {
				require.Equal(t, ephemeralOf(p, left), moved(p, next), msg)
			}
			if joined != "" && len(p.Assignments) > 0 {
				require.LessOrEqual(t, moved(p, next), counts(next)[joined], msg)
			}
			p = next
		}
	}
}

func pick(r *rand.Rand, set map[string]bool) string {
	var ids []string
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return ""
	}
	return ids[r.IntN(len(ids))]
}

func ephemeralOf(p Placement, id string) int {
	n := 0
	for _, a := range p.Assignments {
		if a.Owner == id && !a.Durable {
			n++
		}
	}
	return n
}

func checkPlacement(t *testing.T, msg string, prev, p Placement, live map[string]bool, shards []ShardSpec) {
	t.Helper()
	if len(live) > 0 {
		require.Len(t, p.Assignments, len(shards), msg)
	}
	x, px := NewIndex(p), NewIndex(prev)
	pinned := map[string]int{}
	for _, a := range p.Assignments {
		m, ok := x.Owner(a.Shard)
		require.True(t, ok, msg)
		require.Equal(t, live[m.ID], m.Live, msg)
		require.True(t, m.Live || a.Durable, "%s: ephemeral %s on absent %s", msg, a.Shard, m.ID)
		if old, ok := px.Assignment(a.Shard); ok && a.Durable {
			require.Equal(t, old.Owner, a.Owner, "%s: durable %s moved", msg, a.Shard)
		}
		if a.Durable {
			pinned[a.Owner]++
		}
	}
	c := counts(p)
	lo := len(shards)
	for id := range live {
		lo = min(lo, c[id])
	}
	for id := range live {
		if c[id] > lo+1 {
			require.Equal(t, pinned[id], c[id], "%s: %s holds %d (min %d) but only %d pinned", msg, id, c[id], lo, pinned[id])
		}
	}
}

func TestIndexOwner(t *testing.T) {
	p := Place(Placement{}, members("a", "b"), stream("s", 4, false))
	x := NewIndex(p)
	for _, a := range p.Assignments {
		want, wok := p.Owner(a.Shard)
		got, gok := x.Owner(a.Shard)
		require.Equal(t, wok, gok)
		require.Equal(t, want, got)
	}
	_, ok := x.Owner(Shard{"t", "ns", "nope", 0})
	require.False(t, ok)
	require.Len(t, x.Owned("a"), 2)
}

// withLoad returns shards with the loads of load (by shard number; absent
// is 0).
func withLoad(shards []ShardSpec, load map[int]int64) []ShardSpec {
	out := slices.Clone(shards)
	for i := range out {
		out[i].Load = load[out[i].Shard.Shard]
	}
	return out
}

func ownersOf(p Placement, shards ...int) map[int]string {
	out := map[int]string{}
	x := NewIndex(p)
	for _, n := range shards {
		a, _ := x.Assignment(Shard{"t", "ns", "s", n})
		out[n] = a.Owner
	}
	return out
}

// Load decides only what counts leave open: a leaver's shards go heaviest
// first to the least-loaded survivors; a +1 remainder goes to the least
// loaded of the members that hold equally many.
func TestPlaceLoad(t *testing.T) {
	shards := stream("s", 12, false)
	// Round-robin by ID: a 0,4,8; b 1,5,9; c 2,6,10; d 3,7,11.
	first := Place(Placement{}, members("a", "b", "c", "d"), shards)
	require.Equal(t, map[int]string{3: "d", 7: "d", 11: "d"}, ownersOf(first, 3, 7, 11))

	t.Run("leave", func(t *testing.T) {
		// a holds 300 B/s, b 30, c 150; d's shards weigh 5, 500 and 1.
		load := map[int]int64{0: 100, 4: 100, 8: 100, 1: 10, 5: 10, 9: 10, 2: 50, 6: 50, 10: 50, 3: 5, 7: 500, 11: 1}
		next := Place(first, members("a", "b", "c"), withLoad(shards, load))
		require.Equal(t, map[string]int{"a": 4, "b": 4, "c": 4}, counts(next))
		require.Equal(t, 3, moved(first, next), "only d's shards move")
		// 500 to the least loaded (b), 5 to the next with room (c), 1 to a.
		require.Equal(t, map[int]string{7: "b", 3: "c", 11: "a"}, ownersOf(next, 3, 7, 11))
		// Without load, they are dealt round-robin by ID.
		require.Equal(t, map[int]string{3: "a", 7: "b", 11: "c"}, ownersOf(Place(first, members("a", "b", "c"), shards), 3, 7, 11))
		// Stable: recomputing with other loads moves nothing.
		require.True(t, next.SameAs(Place(next, members("a", "b", "c"), withLoad(shards, map[int]int64{3: 1e9}))))
	})
	t.Run("remainder", func(t *testing.T) {
		// 9 shards on a, b, c (3 each), then e joins: 9 = 2+2+2+2+1. The
		// +1 stays with the least-loaded of a, b, c (c), not the first by ID.
		nine := stream("s", 9, false)
		p := Place(Placement{}, members("a", "b", "c"), nine)
		load := map[int]int64{0: 100, 3: 100, 6: 100, 1: 80, 4: 80, 7: 80, 2: 10, 5: 10, 8: 10}
		next := Place(p, members("a", "b", "c", "e"), withLoad(nine, load))
		require.Equal(t, map[string]int{"a": 2, "b": 2, "c": 3, "e": 2}, counts(next))
		require.Equal(t, 2, moved(p, next))
		require.Equal(t, map[string]int{"a": 3, "b": 2, "c": 2, "e": 2}, counts(Place(p, members("a", "b", "c", "e"), nine)))
	})
	t.Run("deterministic", func(t *testing.T) {
		load := map[int]int64{0: 7, 3: 7, 5: 9, 11: 2}
		ls := withLoad(shards, load)
		want := Place(first, members("a", "c"), ls)
		r := rand.New(rand.NewPCG(3, 4))
		for range 20 {
			ms, sh := members("c", "a"), slices.Clone(ls)
			r.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
			require.Equal(t, want, Place(first, ms, sh))
		}
	})
}
