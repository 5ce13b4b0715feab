package cluster

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// reported returns shards with the groups of p's replica sets as their
// leaders would report them once caught up: voters and in-sync the set.
func reported(p Placement, shards []ShardSpec) []ShardSpec {
	x := NewIndex(p)
	out := slices.Clone(shards)
	for i := range out {
		if a, ok := x.Assignment(out[i].Shard); ok && a.Replicated() {
			out[i].Voters, out[i].Learners, out[i].InSync = slices.Clone(a.Replicas), nil, slices.Clone(a.Replicas)
		}
	}
	return out
}

// joining returns shards with the groups of p's moving sets as their
// leaders report them while the new members catch up: the old voters,
// the new members as learners, the old voters in sync.
func joining(p Placement, shards []ShardSpec) []ShardSpec {
	x := NewIndex(p)
	out := slices.Clone(shards)
	for i := range out {
		a, ok := x.Assignment(out[i].Shard)
		if !ok || !a.Moving() {
			continue
		}
		var learners []string
		for _, id := range a.Replicas {
			if !slices.Contains(a.Voters, id) {
				learners = append(learners, id)
			}
		}
		out[i].Voters, out[i].Learners, out[i].InSync = a.Voters, learners, a.Voters
	}
	return out
}

func movingCount(p Placement) int {
	n := 0
	for _, a := range p.Assignments {
		if a.Moving() {
			n++
		}
	}
	return n
}

// A member absent for ReplaceAfter is replaced in every set it is in, by
// the live member a new set would take, and no sooner; where it led, the
// set's member leading the fewest leads; the result is a fixed point.
func TestPlaceReplacesAfterGrace(t *testing.T) {
	rules := Rules{Now: t0, ReplaceAfter: time.Minute, MaxMoves: 2}
	shards := replicated("r", 12, 3)
	all := zoned("a@z1", "b@z2", "c@z3", "d@z1", "e@z2", "f@z3")
	first := rules.Place(Placement{}, all, shards)
	first = rules.Place(first, all, reported(first, shards))
	require.Equal(t, map[string]int{"a": 6, "b": 6, "c": 6, "d": 6, "e": 6, "f": 6}, copies(first))

	// c goes: listed absent since t0, nothing moves within the grace.
	live := slices.DeleteFunc(slices.Clone(all), func(m Member) bool { return m.ID == "c" })
	down := rules.Place(first, live, reported(first, shards))
	c, _ := NewIndex(down).Member("c")
	require.Equal(t, Member{ID: "c", QUICAddr: "c:7000", Zone: "z3", DownSince: t0}, c)
	require.Equal(t, first.Assignments, down.Assignments)
	at, ok := rules.NextReplace(down)
	require.True(t, ok)
	require.Equal(t, t0.Add(time.Minute), at)

	early := rules
	early.Now = t0.Add(time.Minute - time.Millisecond)
	require.True(t, down.SameAs(early.Place(down, live, reported(first, shards))), "replaced within the grace")

	late := rules
	late.Now = t0.Add(time.Minute)
	next := late.Place(down, live, reported(first, shards))
	checkSets(t, "replaced", next, shards)
	require.Equal(t, map[string]int{"a": 6, "b": 6, "c": 0, "d": 6, "e": 6, "f": 12}, copies(next), "c's replicas went to f, the other member of its zone")
	for i, a := range next.Assignments {
		was := first.Assignments[i]
		require.Equal(t, 3, zonesOf(next, a), "%s: %v", a.Shard, a.Replicas)
		if !slices.Contains(was.Replicas, "c") {
			require.Equal(t, was.Replicas, a.Replicas, "%s had no replica on c", a.Shard)
			continue
		}
		require.Equal(t, 2, len(slices.DeleteFunc(slices.Clone(a.Replicas), func(id string) bool { return !slices.Contains(was.Replicas, id) })),
			"%s: only c's replica changed: %v -> %v", a.Shard, was.Replicas, a.Replicas)
		require.True(t, a.Moving(), "%s: its group still has c", a.Shard)
		if was.Replicas[0] != "c" {
			require.Equal(t, was.Replicas[0], a.Replicas[0], "%s keeps its preferred leader", a.Shard)
		}
	}
	require.LessOrEqual(t, spread(leaders(next), 5), 1, "leaders %v", leaders(next))
	// c stays listed while the groups' reports still have it as a voter.
	_, listed := NewIndex(next).Member("c")
	require.True(t, listed)
	require.True(t, next.SameAs(late.Place(next, live, reported(first, shards))), "not a fixed point")
	_, ok = late.NextReplace(next)
	require.False(t, ok)
	// Once the groups removed c, it is no longer listed.
	done := late.Place(next, live, reported(next, shards))
	_, listed = NewIndex(done).Member("c")
	require.False(t, listed)
}

// With no live member outside a set, a dead member stays in it, and
// NextReplace does not ask for a recompute past the deadline.
func TestPlaceReplaceNeedsASpareMember(t *testing.T) {
	rules := Rules{Now: t0, ReplaceAfter: time.Second}
	shards := replicated("r", 3, 3)
	p := rules.Place(Placement{}, zoned("a", "b", "c"), shards)
	p = rules.Place(p, zoned("a", "b"), shards)
	rules.Now = t0.Add(time.Hour)
	q := rules.Place(p, zoned("a", "b"), shards)
	require.True(t, p.SameAs(q))
	_, ok := rules.NextReplace(q)
	require.False(t, ok)
	// A fourth member: it takes c's place.
	q = rules.Place(q, zoned("a", "b", "d"), shards)
	for _, a := range q.Assignments {
		require.ElementsMatch(t, []string{"a", "b", "d"}, a.Replicas)
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1, "d": 1}, leaders(q))
}

// Growing from 3 to 4 members, 12 shards of RF=3 move to 9/9/9/9 copies,
// at most MaxMoves shards moving at any time, each next move only once the
// reports show the previous ones done; leaderships end balanced, zones and
// sets stay well formed, and the end is a fixed point.
func TestPlaceRebalancesOnGrow(t *testing.T) {
	for _, maxMoves := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("max moves ", maxMoves), func(t *testing.T) {
			rules := Rules{Now: t0, ReplaceAfter: time.Minute, MaxMoves: maxMoves}
			shards := replicated("r", 12, 3)
			p := rules.Place(Placement{}, zoned("a", "b", "c"), shards)
			p = rules.Place(p, zoned("a", "b", "c"), reported(p, shards))
			require.Zero(t, movingCount(p))
			four := zoned("a", "b", "c", "d")
			steps := 0
			for ; steps < 20; steps++ {
				next := rules.Place(p, four, reported(p, shards))
				checkSets(t, "grow", next, shards)
				require.LessOrEqual(t, movingCount(next), maxMoves)
				if next.SameAs(p) {
					break
				}
				// While the new members catch up, nothing else moves.
				catching := rules.Place(next, four, joining(next, shards))
				require.Equal(t, movingCount(next), movingCount(catching))
				for i, a := range catching.Assignments {
					require.Equal(t, next.Assignments[i].Replicas, a.Replicas)
				}
				p = next
			}
			require.Equal(t, map[string]int{"a": 9, "b": 9, "c": 9, "d": 9}, copies(p))
			require.Equal(t, (9+maxMoves-1)/maxMoves, steps-1, "moves per step")
			require.LessOrEqual(t, spread(leaders(p), 4), 1, "leaders %v", leaders(p))
			require.True(t, p.SameAs(rules.Place(p, four, reported(p, shards))))
		})
	}
}

// Rebalancing starts no move of a shard without a report, or whose
// report is not in sync, or with an absent member, or while MaxMoves
// shards are moving, and none that would narrow a set's zones.
func TestPlaceRebalanceWaits(t *testing.T) {
	rules := Rules{Now: t0, MaxMoves: 1}
	shards := replicated("r", 12, 3)
	p := rules.Place(Placement{}, zoned("a", "b", "c"), shards)
	four := zoned("a", "b", "c", "d")

	require.Equal(t, p.Assignments, rules.Place(p, four, shards).Assignments, "no reports: no move")
	lagging := reported(p, shards)
	for i := range lagging {
		lagging[i].InSync = lagging[i].InSync[:2]
	}
	require.Zero(t, movingCount(rules.Place(p, four, lagging)), "a voter behind: no move")
	absent := rules.Place(p, zoned("a", "b", "d"), reported(p, shards))
	require.Equal(t, p.Assignments, withoutGroups(absent.Assignments), "c absent: no move")

	moved := rules.Place(p, four, reported(p, shards))
	require.Equal(t, 1, movingCount(moved))
	require.True(t, moved.SameAs(rules.Place(moved, four, shards)), "one moving: no second move")

	zones := zoned("a@z1", "b@z1", "c@z1", "d@z2")
	z := rules.Place(Placement{}, zones, shards)
	require.Equal(t, map[string]int{"a": 8, "b": 8, "c": 8, "d": 12}, copies(z))
	require.Equal(t, z.Assignments, withoutGroups(rules.Place(z, zones, reported(z, shards)).Assignments), "d's replicas are its sets' only zone z2")
}

func withoutGroups(as []Assignment) []Assignment {
	out := slices.Clone(as)
	for i := range out {
		out[i].Voters, out[i].Learners, out[i].InSync = nil, nil, nil
	}
	return out
}

// A replicated shard's assignment carries its last report (sorted), or
// the previous one without a report; the same report twice changes
// nothing; single-owner shards carry none.
func TestPlaceCarriesReports(t *testing.T) {
	shards := slices.Concat(replicated("r", 1, 3), stream("s", 1, true))
	p := Place(Placement{}, zoned("a", "b", "c"), shards)
	rep := slices.Clone(shards)
	rep[0].Voters, rep[0].Learners, rep[0].InSync = []string{"c", "b", "a"}, []string{"d"}, []string{"b", "a"}
	rep[1].Voters = []string{"x"} // not replicated: ignored
	q := Place(p, zoned("a", "b", "c", "d"), rep)
	a := q.Assignments[0]
	require.Equal(t, []string{"a", "b", "c"}, a.Voters)
	require.Equal(t, []string{"d"}, a.Learners)
	require.Equal(t, []string{"a", "b"}, a.InSync)
	require.True(t, a.Moving())
	require.True(t, a.UnderReplicated())
	require.Nil(t, q.Assignments[1].Voters)
	require.True(t, q.SameAs(Place(q, zoned("a", "b", "c", "d"), rep)))
	require.True(t, q.SameAs(Place(q, zoned("a", "b", "c", "d"), shards)), "no report keeps the last")

	x := NewIndex(q)
	r0 := a.Shard
	require.True(t, x.Holds(r0, "d"))
	require.False(t, x.Holds(r0, "e"))
	require.True(t, x.Moving(r0))
	require.True(t, x.UnderReplicated(r0))
	require.Equal(t, []Shard{r0}, x.HeldBy("d"))
	require.Nil(t, x.ReplicaOf("d"))
}

// DownSince is set when a member is first found absent, kept while it
// stays absent, survives a JSON round trip equal, and clears when the
// member is live again.
func TestPlaceDownSince(t *testing.T) {
	rules := Rules{Now: t0}
	shards := replicated("r", 3, 3)
	p := rules.Place(Placement{}, zoned("a", "b", "c"), shards)
	rules.Now = t0.Add(time.Second).In(time.FixedZone("x", 3600))
	q := rules.Place(p, zoned("a", "b"), shards)
	rules.Now = t0.Add(time.Hour)
	r := rules.Place(q, zoned("a", "b"), shards)
	c, _ := NewIndex(r).Member("c")
	require.Equal(t, t0.Add(time.Second), c.DownSince)
	raw, err := json.Marshal(r)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"down_since":"2025-06-01T12:00:01Z"`)
	var back Placement
	require.NoError(t, json.Unmarshal(raw, &back))
	require.True(t, back.SameAs(r))
	require.True(t, r.SameAs(rules.Place(back, zoned("a", "b"), shards)))
	require.Equal(t, p, rules.Place(r, zoned("a", "b", "c"), shards))
}

// Manual changes: validation, and the placer keeping them.
func TestPlacementMoveReplicaAndLeader(t *testing.T) {
	rules := Rules{Now: t0, MaxMoves: 2}
	shards := slices.Concat(replicated("r", 11, 3), stream("s", 1, true))
	five := zoned("a", "b", "c", "d", "e")
	p := rules.Place(Placement{}, five[:4], shards)
	for range 10 {
		p = rules.Place(p, five, reported(p, shards))
	}
	held := copies(p)
	require.LessOrEqual(t, spread(held, 5), 1, "copies %v", held)
	require.Zero(t, movingCount(p))
	// A follower's replica on a member holding 7 of the 34 copies goes to
	// one holding 6: counts stay within one, so rebalancing keeps it.
	var a Assignment
	var from, to string
	for _, as := range p.Assignments {
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			if as.Replicated() && held[as.Replicas[1]] > held[id] && !slices.Contains(as.Replicas, id) {
				a, from, to = as, as.Replicas[1], id
			}
		}
	}
	require.NotEmpty(t, to)
	outside := slices.DeleteFunc([]string{"a", "b", "c", "d", "e"}, func(id string) bool { return slices.Contains(a.Replicas, id) })

	for _, tc := range []struct {
		s        Shard
		from, to string
		err      error
	}{
		{Shard{"t", "ns", "nope", 0}, from, to, ErrNoShard},
		{Shard{"t", "ns", "s", 0}, from, to, ErrNoShard},
		{a.Shard, outside[0], to, ErrBadMove},
		{a.Shard, from, a.Replicas[2], ErrBadMove},
		{a.Shard, from, "zz", ErrBadMove},
	} {
		_, err := p.MoveReplica(tc.s, tc.from, tc.to)
		require.ErrorIs(t, err, tc.err, "%s %s -> %s", tc.s, tc.from, tc.to)
	}
	m, err := p.MoveReplica(a.Shard, from, to)
	require.NoError(t, err)
	b, _ := NewIndex(m).Assignment(a.Shard)
	require.Equal(t, a.Replicas[0], b.Replicas[0])
	require.ElementsMatch(t, []string{a.Replicas[0], a.Replicas[2], to}, b.Replicas)
	require.True(t, b.Moving())
	_, err = m.MoveReplica(a.Shard, to, from)
	require.ErrorIs(t, err, ErrShardMoving)
	// The placer keeps it, and once done it stays.
	kept := rules.Place(m, five, shards)
	require.True(t, kept.SameAs(m))
	done := rules.Place(kept, five, reported(kept, shards))
	require.True(t, done.SameAs(rules.Place(done, five, reported(done, shards))))
	got, _ := NewIndex(done).Assignment(a.Shard)
	require.Equal(t, b.Replicas, got.Replicas)

	// Moving the preferred leader's replica hands its place to the new
	// member.
	l, err := done.MoveReplica(a.Shard, b.Replicas[0], from)
	require.NoError(t, err)
	got, _ = NewIndex(l).Assignment(a.Shard)
	require.Equal(t, from, got.Replicas[0])
	require.Equal(t, from, got.Owner)

	_, err = done.PreferLeader(a.Shard, from)
	require.ErrorIs(t, err, ErrBadMove)
	_, err = done.PreferLeader(Shard{"t", "ns", "s", 0}, "a")
	require.ErrorIs(t, err, ErrNoShard)
	leader := b.Replicas[2]
	pl, err := done.PreferLeader(a.Shard, leader)
	require.NoError(t, err)
	got, _ = NewIndex(pl).Assignment(a.Shard)
	require.Equal(t, leaderFirst(b.Replicas, leader), got.Replicas)
	require.Equal(t, leader, got.Owner)
	gone := rules.Place(pl, slices.DeleteFunc(slices.Clone(five), func(m Member) bool { return m.ID == leader }), shards)
	_, err = gone.PreferLeader(a.Shard, leader)
	require.ErrorIs(t, err, ErrBadMove, "not live")
}

// Random joins, leaves and passing time with the groups' reports
// following the placement: every set stays well formed, moves the
// rebalancing starts never exceed MaxMoves at once, no member is absent
// from a set past the grace while a spare is live, and once the members
// stay put the copies converge to within one of each other and to a fixed
// point.
func TestPlaceMovesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 7))
	runs := 60
	if testing.Short() {
		runs = 15
	}
	for run := range runs {
		rules := Rules{Now: t0, ReplaceAfter: time.Minute, MaxMoves: 1 + r.IntN(3)}
		live := map[string]bool{"m0": true, "m1": true, "m2": true}
		var shards []ShardSpec
		var p Placement
		for step := range 40 {
			switch op := r.IntN(5); {
			case op == 0:
				live[fmt.Sprintf("m%d", r.IntN(7))] = true
			case op == 1 && len(live) > 3:
				delete(live, pick(r, live))
			case op == 2:
				rules.Now = rules.Now.Add(time.Duration(r.IntN(90)) * time.Second)
			default:
				shards = append(shards, replicated(fmt.Sprintf("s%d", step), 1+r.IntN(4), []int{3, 3, 5}[r.IntN(3)])...)
			}
			ms := zoned(slices.Sorted(mapsKeys(live))...)
			next := rules.Place(p, ms, reported(p, shards))
			msg := fmt.Sprintf("run %d step %d", run, step)
			checkSets(t, msg, next, shards)
			started, px, nx := 0, NewIndex(p), NewIndex(next)
			for _, a := range next.Assignments {
				if old, ok := px.Assignment(a.Shard); ok && !sameSet(old.Replicas, a.Replicas) && !slices.ContainsFunc(old.Replicas, func(id string) bool { return !live[id] }) {
					started++
				}
			}
			require.LessOrEqual(t, started, rules.MaxMoves, "%s: moves of live sets", msg)
			for _, m := range next.Members {
				if !m.Live && rules.Now.Sub(m.DownSince) >= rules.ReplaceAfter && len(live) >= 5 {
					require.Empty(t, nx.ReplicaOf(m.ID), "%s: %s absent since %v", msg, m.ID, m.DownSince)
				}
			}
			p = next
		}
		ms := zoned(slices.Sorted(mapsKeys(live))...)
		rules.Now = rules.Now.Add(2 * rules.ReplaceAfter) // the absent are past their grace
		for range 200 {
			next := rules.Place(p, ms, reported(p, shards))
			if next.SameAs(p) {
				break
			}
			p = next
		}
		require.True(t, p.SameAs(rules.Place(p, ms, reported(p, shards))), "run %d: no fixed point", run)
		held := map[string]int{}
		for _, m := range ms {
			held[m.ID] = 0
		}
		for _, a := range p.Assignments {
			for _, id := range a.Replicas {
				if live[id] {
					held[id]++
				}
			}
		}
		require.LessOrEqual(t, spread(held, len(ms)), 1, "run %d: copies %v", run, held)
	}
}
