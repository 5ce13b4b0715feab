package cluster

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// zoned returns members from "id" or "id@zone" specs.
func zoned(specs ...string) []Member {
	out := make([]Member, 0, len(specs))
	for _, s := range specs {
		id, zone, _ := strings.Cut(s, "@")
		out = append(out, Member{ID: id, QUICAddr: id + ":7000", Zone: zone})
	}
	return out
}

// replicated returns the n shards of durable stream name with r replicas.
func replicated(name string, n, r int) []ShardSpec {
	out := stream(name, n, true)
	for i := range out {
		out[i].Replicas = r
	}
	return out
}

// copies counts each member's shard copies: one per owned single-owner
// shard, one per replica.
func copies(p Placement) map[string]int {
	c := map[string]int{}
	for _, m := range p.Members {
		c[m.ID] += 0
	}
	for _, a := range p.Assignments {
		if !a.Replicated() {
			c[a.Owner]++
		}
		for _, id := range a.Replicas {
			c[id]++
		}
	}
	return c
}

// leaders counts each member's preferred leaderships.
func leaders(p Placement) map[string]int {
	c := map[string]int{}
	for _, a := range p.Assignments {
		if a.Replicated() {
			c[a.Replicas[0]]++
		}
	}
	return c
}

// zonesOf is how many distinct zones a's replicas span.
func zonesOf(p Placement, a Assignment) int {
	x := NewIndex(p)
	zones := map[string]bool{}
	for _, m := range x.Replicas(a.Shard) {
		zones[m.Zone] = true
	}
	return len(zones)
}

// checkSets checks what every replica set must be: r distinct members,
// the owner first, durable.
func checkSets(t *testing.T, msg string, p Placement, shards []ShardSpec) {
	t.Helper()
	want := map[Shard]int{}
	for _, sp := range shards {
		want[sp.Shard] = sp.Replicas
	}
	for _, a := range p.Assignments {
		if want[a.Shard] <= 1 {
			require.Empty(t, a.Replicas, "%s: %s is not replicated", msg, a.Shard)
			continue
		}
		require.Len(t, a.Replicas, want[a.Shard], "%s: %s", msg, a.Shard)
		require.Equal(t, a.Replicas[0], a.Owner, "%s: %s's owner is its preferred leader", msg, a.Shard)
		require.True(t, a.Durable, msg)
		require.Len(t, slices.Compact(slices.Sorted(slices.Values(a.Replicas))), len(a.Replicas), "%s: %s has a member twice: %v", msg, a.Shard, a.Replicas)
		require.True(t, slices.IsSorted(a.Replicas[1:]), "%s: %s's followers by ID: %v", msg, a.Shard, a.Replicas)
	}
}

func TestPlaceReplicasTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []Member
		shards  []ShardSpec
		copies  map[string]int
		leaders map[string]int
		zones   int // distinct zones of every set (0: not checked)
		unowned int
	}{
		{name: "12 shards RF=3 on 3 brokers", members: zoned("a", "b", "c"), shards: replicated("r", 12, 3),
			copies: map[string]int{"a": 12, "b": 12, "c": 12}, leaders: map[string]int{"a": 4, "b": 4, "c": 4}},
		{name: "12 shards RF=3 on 4 brokers", members: zoned("a", "b", "c", "d"), shards: replicated("r", 12, 3),
			copies: map[string]int{"a": 9, "b": 9, "c": 9, "d": 9}, leaders: map[string]int{"a": 3, "b": 3, "c": 3, "d": 3}},
		{name: "10 shards RF=3 on 5 brokers", members: zoned("a", "b", "c", "d", "e"), shards: replicated("r", 10, 3),
			copies: map[string]int{"a": 6, "b": 6, "c": 6, "d": 6, "e": 6}, leaders: map[string]int{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2}},
		{name: "10 shards RF=5 on 5 brokers", members: zoned("a", "b", "c", "d", "e"), shards: replicated("r", 10, 5),
			copies: map[string]int{"a": 10, "b": 10, "c": 10, "d": 10, "e": 10}, leaders: map[string]int{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2}},
		{name: "RF=3 over three zones of two", members: zoned("a@z1", "b@z2", "c@z3", "d@z1", "e@z2", "f@z3"), shards: replicated("r", 12, 3),
			copies: map[string]int{"a": 6, "b": 6, "c": 6, "d": 6, "e": 6, "f": 6}, leaders: map[string]int{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2, "f": 2}, zones: 3},
		{name: "zones before balance: the lone zone's member is in every set", members: zoned("a@z1", "b@z1", "c@z1", "d@z2"), shards: replicated("r", 12, 3),
			copies: map[string]int{"a": 8, "b": 8, "c": 8, "d": 12}, leaders: map[string]int{"a": 3, "b": 3, "c": 3, "d": 3}, zones: 2},
		{name: "RF=5 over three zones spreads 2+2+1", members: zoned("a@z1", "b@z1", "c@z2", "d@z2", "e@z3", "f@z3"), shards: replicated("r", 6, 5),
			copies: map[string]int{"a": 5, "b": 5, "c": 5, "d": 5, "e": 5, "f": 5}, leaders: map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1}, zones: 3},
		{name: "single-owner shards count as copies", members: zoned("a", "b", "c", "d"),
			shards: slices.Concat(replicated("r", 4, 3), stream("d", 4, true)),
			copies: map[string]int{"a": 4, "b": 4, "c": 4, "d": 4}, leaders: map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}},
		{name: "fewer live members than replicas: unassigned", members: zoned("a", "b"),
			shards: slices.Concat(replicated("r", 3, 3), stream("e", 2, false)),
			copies: map[string]int{"a": 1, "b": 1}, leaders: map[string]int{}, unowned: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Place(Placement{}, tc.members, tc.shards)
			checkSets(t, tc.name, p, tc.shards)
			require.Equal(t, tc.copies, copies(p))
			require.Equal(t, tc.leaders, leaders(p))
			require.Len(t, p.Assignments, len(tc.shards)-tc.unowned)
			if tc.zones > 0 {
				for _, a := range p.Assignments {
					require.Equal(t, tc.zones, zonesOf(p, a), "zones of %s: %v", a.Shard, a.Replicas)
				}
			}
			// A fixed point, and equal inputs in any order give equal output.
			require.True(t, p.SameAs(Place(p, tc.members, tc.shards)))
			r := rand.New(rand.NewPCG(5, 6))
			for range 10 {
				ms, sh := slices.Clone(tc.members), slices.Clone(tc.shards)
				r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
				r.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
				require.Equal(t, p, Place(Placement{}, ms, sh))
			}
		})
	}
}

// A replica set never changes once chosen: a member that leaves stays in
// it (listed absent), one that joins takes none of it, and new sets go to
// the members with the fewest copies.
func TestPlaceReplicaSetsStay(t *testing.T) {
	shards := replicated("r", 12, 3)
	first := Place(Placement{}, zoned("a", "b", "c", "d"), shards)

	t.Run("leave", func(t *testing.T) {
		next := Place(first, zoned("a", "b", "c"), shards)
		require.Equal(t, first.Assignments, next.Assignments)
		x := NewIndex(next)
		d, ok := x.Member("d")
		require.True(t, ok)
		require.False(t, d.Live)
		require.Equal(t, "d:7000", d.QUICAddr, "an absent replica keeps its address")
		require.True(t, next.SameAs(Place(next, zoned("a", "b", "c"), shards)))
		// It returns: nothing moves either.
		back := Place(next, zoned("a", "b", "c", "d"), shards)
		require.Equal(t, first, back)
	})
	t.Run("join", func(t *testing.T) {
		three := Place(Placement{}, zoned("a", "b", "c"), shards)
		more := slices.Concat(shards, replicated("n", 4, 3))
		next := Place(three, zoned("a", "b", "c", "d"), more)
		for _, a := range three.Assignments {
			got, _ := NewIndex(next).Assignment(a.Shard)
			require.True(t, a.Equal(got), "%s moved: %v -> %v", a.Shard, a.Replicas, got.Replicas)
		}
		// d, empty, is in every new set and leads them all.
		require.Equal(t, map[string]int{"a": 15, "b": 15, "c": 14, "d": 4}, copies(next))
		require.Equal(t, map[string]int{"a": 4, "b": 4, "c": 4, "d": 4}, leaders(next))
	})
	t.Run("single-owner shards fill around replicas", func(t *testing.T) {
		three := Place(Placement{}, zoned("a", "b", "c"), shards)
		more := slices.Concat(shards, stream("e", 4, false))
		next := Place(three, zoned("a", "b", "c", "d"), more)
		require.Equal(t, map[string]int{"a": 12, "b": 12, "c": 12, "d": 4}, copies(next))
	})
}

// A placement's JSON for single-owner shards and zoneless members is as
// it was before replication: no new keys.
func TestPlacementJSONUnreplicatedUnchanged(t *testing.T) {
	p := Place(Placement{}, members("a"), stream("s", 1, true))
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	require.JSONEq(t, `{"version":0,"members":[{"id":"a","quic_addr":"a:7000","live":true}],
		"assignments":[{"tenant":"t","namespace":"ns","stream":"s","shard":0,"owner":"a","durable":true}]}`, string(raw))
}

func TestIndexReplicas(t *testing.T) {
	shards := slices.Concat(replicated("r", 2, 3), stream("s", 2, false))
	p := Place(Placement{}, zoned("a", "b", "c"), shards)
	p = Place(p, zoned("a", "b"), shards) // c absent: still a replica
	x := NewIndex(p)
	for _, a := range p.Assignments {
		ms := x.Replicas(a.Shard)
		if !a.Replicated() {
			require.Nil(t, ms)
			continue
		}
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
			require.Equal(t, m.ID != "c", m.Live)
		}
		require.Equal(t, a.Replicas, ids)
	}
	require.Nil(t, x.Replicas(Shard{"t", "ns", "nope", 0}))
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, []Shard{{"t", "ns", "r", 0}, {"t", "ns", "r", 1}}, x.ReplicaOf(id))
	}
}

// Random joins, leaves and stream creations with zones and replicated
// streams: every set is well formed, never changes once chosen, a new one
// has live members only and spans as many zones as it can, a replicated
// shard waits unassigned only while too few members are live, and every
// placement is a fixed point.
func TestPlaceReplicaProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 3))
	runs := 150
	if testing.Short() {
		runs = 40
	}
	for run := range runs {
		live := map[string]bool{}
		var shards []ShardSpec
		var p Placement
		for step := range 30 {
			switch op := r.IntN(4); {
			case op == 0 || len(live) == 0:
				live[fmt.Sprintf("m%d@z%d", r.IntN(8), r.IntN(3))] = true
			case op == 1:
				delete(live, pick(r, live))
			default:
				name := fmt.Sprintf("s%d", step)
				switch rf := []int{1, 3, 3, 5}[r.IntN(4)]; rf {
				case 1:
					shards = append(shards, stream(name, 1+r.IntN(6), r.IntN(2) == 0)...)
				default:
					shards = append(shards, replicated(name, 1+r.IntN(6), rf)...)
				}
			}
			ms := zoned(slices.Sorted(mapsKeys(live))...)
			next := Place(p, ms, shards)
			msg := fmt.Sprintf("run %d step %d", run, step)
			checkSets(t, msg, next, shards)
			checkNewSets(t, msg, p, next, ms, shards)
			require.True(t, next.SameAs(Place(next, ms, shards)), "%s: not a fixed point", msg)
			p = next
		}
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkNewSets checks next's replica sets against prev's and the members.
func checkNewSets(t *testing.T, msg string, prev, next Placement, ms []Member, shards []ShardSpec) {
	t.Helper()
	px, nx := NewIndex(prev), NewIndex(next)
	zones := map[string]bool{}
	// A member ID may be listed twice with different zones: the last wins.
	byID := map[string]Member{}
	for _, m := range ms {
		byID[m.ID] = m
	}
	for _, m := range byID {
		zones[m.Zone] = true
	}
	for _, sp := range shards {
		if sp.Replicas <= 1 {
			continue
		}
		a, placed := nx.Assignment(sp.Shard)
		old, had := px.Assignment(sp.Shard)
		switch {
		case had:
			require.True(t, old.Equal(a), "%s: %s's set changed: %v -> %v", msg, sp.Shard, old.Replicas, a.Replicas)
		case !placed:
			require.Less(t, len(byID), sp.Replicas, "%s: %s unassigned with %d live", msg, sp.Shard, len(byID))
		default:
			for _, m := range nx.Replicas(sp.Shard) {
				require.True(t, m.Live, "%s: new set of %s has absent %s", msg, sp.Shard, m.ID)
			}
			require.Equal(t, min(sp.Replicas, len(zones)), zonesOf(next, a), "%s: %s spans too few zones: %v", msg, sp.Shard, a.Replicas)
		}
	}
}

// spread is max-min of c over n members (a member missing from c holds 0).
func spread(c map[string]int, n int) int {
	lo, hi := 1<<30, 0
	if len(c) < n {
		lo = 0
	}
	for _, v := range c {
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi - lo
}

// New replica sets balance copies and preferred leaderships within one of
// each other, for any number of shards of RF=3 or 5 on 3 to 9 members; with
// zones (2 to 5, of equal size), created one shard at a time, leaderships
// still do, and copies within two (zone spread comes first).
func TestPlaceReplicaBalance(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	for n := 3; n <= len(ids); n++ {
		for _, rf := range []int{3, 5} {
			for k := 1; k <= 40 && rf <= n; k++ {
				p := Place(Placement{}, zoned(ids[:n]...), replicated("r", k, rf))
				require.LessOrEqual(t, spread(copies(p), n), 1, "%d shards RF=%d on %d: copies %v", k, rf, n, copies(p))
				require.LessOrEqual(t, spread(leaders(p), n), 1, "%d shards RF=%d on %d: leaders %v", k, rf, n, leaders(p))
			}
		}
	}
	for zones := 2; zones <= 5; zones++ {
		for per := 1; per <= 3; per++ {
			var ms []string
			for i := range per {
				for z := range zones {
					ms = append(ms, fmt.Sprintf("m%d%d@z%d", z, i, z))
				}
			}
			for _, rf := range []int{3, 5} {
				var p Placement
				var shards []ShardSpec
				for k := 1; k <= 40 && rf <= len(ms); k++ {
					shards = append(shards, replicated(fmt.Sprint("s", k), 1, rf)...)
					p = Place(p, zoned(ms...), shards)
					msg := fmt.Sprintf("%d shards RF=%d on %d zones of %d", k, rf, zones, per)
					require.LessOrEqual(t, spread(copies(p), len(ms)), 2, "%s: copies %v", msg, copies(p))
					require.LessOrEqual(t, spread(leaders(p), len(ms)), 1, "%s: leaders %v", msg, leaders(p))
				}
			}
		}
	}
}
