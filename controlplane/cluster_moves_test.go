package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// report sends member id's keepalive with a replica report of each given
// shard: id leads it in term, with voters and in-sync voters as given.
func (in *instance) report(t testing.TB, id string, reports ...cluster.ReplicaReport) {
	t.Helper()
	for i := range reports {
		reports[i].Leader = id
		if reports[i].Term == 0 {
			reports[i].Term = 1
		}
	}
	if reports == nil {
		reports = []cluster.ReplicaReport{}
	}
	raw, err := json.Marshal(api.KeepAliveRequest{Replicas: reports})
	require.NoError(t, err)
	in.mustDo(t, http.StatusOK, "POST", "/v1/members/"+id+"/keepalive", string(raw))
}

// settle has each replicated shard's preferred leader report its group as
// exactly its target set, every voter in sync: what a cluster of brokers
// reports once every move has finished.
func (in *instance) settle(t testing.TB, p cluster.Placement) {
	t.Helper()
	by := map[string][]cluster.ReplicaReport{}
	for _, a := range p.Assignments {
		if a.Replicated() {
			set := slices.Sorted(slices.Values(a.Replicas))
			by[a.Replicas[0]] = append(by[a.Replicas[0]], cluster.ReplicaReport{Shard: a.Shard, Voters: set, InSync: set})
		}
	}
	for _, m := range p.Members {
		if m.Live {
			in.report(t, m.ID, by[m.ID]...)
		}
	}
}

func copiesPerMember(p cluster.Placement) map[string]int {
	n := map[string]int{}
	for _, a := range p.Assignments {
		for _, id := range a.Replicas {
			n[id]++
		}
	}
	return n
}

// The store keeps each member's last replica report; an identical report
// wakes nobody, a different one wakes Notify; only a member reports.
func TestMemberStoreReplicaReports(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		ms := open(t).(MemberStore)
		ctx := context.Background()
		_, err := ms.Register(ctx, cluster.Member{ID: "a", QUICAddr: "127.0.0.1:7000"}, 30*time.Second)
		require.NoError(t, err)
		sh := cluster.Shard{Tenant: "t1", Namespace: "ns", Stream: "s", Shard: 1}
		rep := []cluster.ReplicaReport{{Shard: sh, Leader: "a", Term: 2, Voters: []string{"a", "b", "c"}, InSync: []string{"a", "b"}}}
		require.ErrorIs(t, ms.ReportReplicas(ctx, "x", rep), ErrNotFound)

		woke := func() bool {
			changed, err := ms.Notify(ctx)
			require.NoError(t, err)
			require.NoError(t, ms.ReportReplicas(ctx, "a", rep))
			select {
			case <-changed:
				return true
			case <-time.After(300 * time.Millisecond):
				return false
			}
		}
		require.True(t, woke(), "a first report wakes Notify")
		require.False(t, woke(), "the same report again does not")
		rep[0].InSync = []string{"a", "b", "c"}
		require.True(t, woke(), "a changed report does")
		got, err := ms.ReplicaReports(ctx)
		require.NoError(t, err)
		require.Equal(t, map[string][]cluster.ReplicaReport{"a": rep}, got)
	})
}

// Of the members' reports, each shard takes the highest term's, by its
// own leader; when that leader is dead, none counts (an older term's
// leader is not the leader any more) and the placement keeps what it had.
func TestWithReportsTakesTheLiveLeadersLatestTerm(t *testing.T) {
	sh := func(i int) cluster.Shard { return cluster.Shard{Tenant: "t1", Namespace: "ns", Stream: "s", Shard: i} }
	specs := []cluster.ShardSpec{{Shard: sh(0), Replicas: 3}, {Shard: sh(1), Replicas: 3}, {Shard: sh(2), Replicas: 1}}
	rep := func(s int, leader string, term uint64, voters ...string) cluster.ReplicaReport {
		return cluster.ReplicaReport{Shard: sh(s), Leader: leader, Term: term, Voters: voters, InSync: voters}
	}
	withReports(specs, map[string][]cluster.ReplicaReport{
		"a": {rep(0, "a", 3, "a", "b", "c"), rep(1, "a", 7, "a", "b", "c"), rep(2, "a", 1, "a")},
		"b": {rep(0, "b", 4, "a", "b", "d")}, // shard 0's newer term
		"c": {rep(1, "c", 9, "c", "x", "y")}, // c is dead: its report does not count
		"d": {rep(1, "a", 99, "d")},          // not d's own leadership
	}, []cluster.Member{{ID: "a", Live: true}, {ID: "b", Live: true}, {ID: "d", Live: true}})
	require.Equal(t, []string{"a", "b", "d"}, specs[0].Voters)
	require.Nil(t, specs[1].Voters, "the highest term's leader is dead: no report counts until a live leader's")
	require.Nil(t, specs[2].Voters, "a shard that is not replicated takes no report")
}

// Through the API: a leader's report (validated) shows in the placement's
// assignment, the same report again writes nothing, and an operator moves
// a replica (not while the shard is moving) and a preferred leader, with
// typed refusals.
func TestClusterReportsAndManualMoves(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstanceWith(t, open(t), PlacerConfig{LeaseTTL: 30 * time.Second, MaxMoves: -1})
		in.seed(t)
		for _, id := range []string{"a", "b", "c", "d"} {
			in.register(t, id)
		}
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"r","durable":true,"replicas":3}`)
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"plain","durable":true}`)
		p := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 2 })
		sh := cluster.Shard{Tenant: "t1", Namespace: "ns", Stream: "r"}
		a, _ := cluster.NewIndex(p).Assignment(sh)
		require.True(t, a.UnderReplicated(), "no report yet")
		leader, set := a.Replicas[0], slices.Sorted(slices.Values(a.Replicas))

		for _, body := range []string{
			`{"replicas":[{"tenant":"t1","namespace":"ns","stream":"r","shard":0,"leader":"zz","term":1,"voters":["zz"],"in_sync":["zz"]}]}`,
			`{"replicas":[{"tenant":"t1","namespace":"ns","stream":"r","shard":0,"leader":"` + leader + `","term":0,"voters":["` + leader + `"],"in_sync":[]}]}`,
			`{"replicas":[{"tenant":"t1","namespace":"ns","stream":"r","shard":0,"leader":"` + leader + `","term":1,"voters":["q"],"in_sync":[]}]}`,
			`{"replicas":[{"tenant":"t1","namespace":"ns","stream":"r","shard":0,"leader":"` + leader + `","term":1,"voters":["` + leader + `"],"in_sync":["q"]}]}`,
		} {
			in.mustDo(t, http.StatusBadRequest, "POST", "/v1/members/"+leader+"/keepalive", body)
		}
		in.report(t, leader, cluster.ReplicaReport{Shard: sh, Voters: set, InSync: set[:2]})
		p = in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool {
			a, _ := cluster.NewIndex(p).Assignment(sh)
			return a.Voters != nil
		})
		a, _ = cluster.NewIndex(p).Assignment(sh)
		require.Equal(t, set, a.Voters)
		require.Equal(t, set[:2], a.InSync)
		require.True(t, a.UnderReplicated())
		require.False(t, a.Moving())
		in.report(t, leader, cluster.ReplicaReport{Shard: sh, Voters: set, InSync: set[:2]})
		require.Equal(t, p.Version, in.placementAfter(t, p.Version, 300*time.Millisecond).Version, "the same report writes nothing")
		in.report(t, leader, cluster.ReplicaReport{Shard: sh, Voters: set, InSync: set})
		p = in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return !cluster.NewIndex(p).UnderReplicated(sh) })

		move := func(want int, shard, body string) api.ErrorBody {
			t.Helper()
			var e api.ErrorBody
			r := in.mustDo(t, want, "POST", "/v1/shards/t1/ns/"+shard+"/move", body)
			if want != http.StatusOK {
				r.decode(t, &e)
			}
			return e
		}
		var spare string
		for _, m := range p.Members {
			if !slices.Contains(set, m.ID) {
				spare = m.ID
			}
		}
		from := a.Replicas[1]
		require.Equal(t, "not_found", move(http.StatusNotFound, "plain/0", `{"from":"a","to":"b"}`).Code)
		require.Equal(t, "not_found", move(http.StatusNotFound, "r/1", `{"from":"a","to":"b"}`).Code)
		require.Equal(t, "bad_request", move(http.StatusBadRequest, "r/x", `{"from":"a","to":"b"}`).Code)
		require.Contains(t, move(http.StatusBadRequest, "r/0", fmt.Sprintf(`{"from":%q,"to":%q}`, spare, from)).Message, "is not one of its replicas")
		require.Contains(t, move(http.StatusBadRequest, "r/0", fmt.Sprintf(`{"from":%q,"to":%q}`, from, leader)).Message, "already")
		require.Contains(t, move(http.StatusBadRequest, "r/0", fmt.Sprintf(`{"from":%q,"to":"nobody"}`, from)).Message, "not a live member")
		require.Equal(t, "bad_request", move(http.StatusBadRequest, "r/0", `{"from":"a"}`).Code)

		var moved api.ShardChangeResponse
		in.mustDo(t, http.StatusOK, "POST", "/v1/shards/t1/ns/r/0/move", fmt.Sprintf(`{"from":%q,"to":%q}`, from, spare)).decode(t, &moved)
		require.Equal(t, leader, moved.Assignment.Replicas[0])
		require.NotContains(t, moved.Assignment.Replicas, from)
		require.Contains(t, moved.Assignment.Replicas, spare)
		require.True(t, moved.Assignment.Moving(), "the group has not followed yet")
		e := move(http.StatusConflict, "r/0", fmt.Sprintf(`{"from":%q,"to":%q}`, spare, from))
		require.Equal(t, "moving", e.Code)

		// The group follows: the learner caught up, promoted, from removed.
		next := slices.Sorted(slices.Values(moved.Assignment.Replicas))
		in.report(t, leader, cluster.ReplicaReport{Shard: sh, Term: 1, Voters: set, Learners: []string{spare}, InSync: set})
		in.report(t, leader, cluster.ReplicaReport{Shard: sh, Term: 1, Voters: next, InSync: next})
		p = in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return !cluster.NewIndex(p).Moving(sh) })
		a, _ = cluster.NewIndex(p).Assignment(sh)
		require.Equal(t, moved.Assignment.Replicas, a.Replicas, "the placer keeps the manual move")

		var led api.ShardChangeResponse
		in.mustDo(t, http.StatusOK, "POST", "/v1/shards/t1/ns/r/0/leader", fmt.Sprintf(`{"to":%q}`, spare)).decode(t, &led)
		require.Equal(t, spare, led.Assignment.Replicas[0])
		require.Equal(t, spare, led.Assignment.Owner)
		var e2 api.ErrorBody
		in.mustDo(t, http.StatusBadRequest, "POST", "/v1/shards/t1/ns/r/0/leader", fmt.Sprintf(`{"to":%q}`, from)).decode(t, &e2)
		require.Contains(t, e2.Message, "is not one of its replicas")
	})
}

// A member of a replica set absent for ReplaceAfter is replaced by a live
// broker outside the set; before that, the set waits for it.
func TestClusterReplacesAnAbsentMember(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstanceWith(t, open(t), PlacerConfig{LeaseTTL: 30 * time.Second, ReplaceAfter: 700 * time.Millisecond})
		in.seed(t)
		for _, id := range []string{"a", "b", "c"} {
			in.register(t, id)
		}
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"r","durable":true,"replicas":3,"shards":2}`)
		p := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 2 })
		in.settle(t, p)
		in.register(t, "d")
		in.mustDo(t, http.StatusOK, "DELETE", "/v1/members/c", "")
		left := time.Now()
		q := in.awaitPlacement(t, 5*time.Second, func(q cluster.Placement) bool {
			c, _ := cluster.NewIndex(q).Member("c")
			return !c.Live && !c.DownSince.IsZero()
		})
		require.Equal(t, 2, len(cluster.NewIndex(q).ReplicaOf("c")), "not replaced before ReplaceAfter")
		q = in.awaitPlacement(t, 5*time.Second, func(q cluster.Placement) bool { return len(cluster.NewIndex(q).ReplicaOf("c")) == 0 })
		require.GreaterOrEqual(t, time.Since(left), 700*time.Millisecond)
		for _, a := range q.Assignments {
			require.ElementsMatch(t, []string{"a", "b", "d"}, a.Replicas)
			require.True(t, a.Moving(), "d joins: the group still reports c")
		}
	})
}

// A fourth broker gets replicas until counts balance (9/9/9/9 for 12
// shards of 3 replicas), never more than MaxMoves shards moving at once,
// each move started only once the previous ones are reported done.
func TestClusterGrowRebalancesWithinMaxMoves(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstanceWith(t, open(t), PlacerConfig{LeaseTTL: 30 * time.Second, MaxMoves: 2})
		in.seed(t)
		for _, id := range []string{"a", "b", "c"} {
			in.register(t, id)
		}
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"r","durable":true,"replicas":3,"shards":12}`)
		p := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 12 })
		in.settle(t, p)
		p = in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool {
			return !slices.ContainsFunc(p.Assignments, cluster.Assignment.UnderReplicated)
		})
		in.register(t, "d")
		for round := 0; ; round++ {
			require.Less(t, round, 20, "no balance after 20 rounds: %v", copiesPerMember(p))
			p = in.placementAfter(t, p.Version, 5*time.Second)
			moving := 0
			for _, a := range p.Assignments {
				if a.Moving() {
					moving++
				}
			}
			require.LessOrEqual(t, moving, 2)
			if moving == 0 && len(p.Members) == 4 {
				if n := copiesPerMember(p); n["d"] == 9 {
					require.Equal(t, map[string]int{"a": 9, "b": 9, "c": 9, "d": 9}, n)
					return
				}
			}
			in.settle(t, p)
		}
	})
}

// Moving a replica is an operator admin's call: a tenant's admin is
// refused, the operator tenant's admin allowed.
func TestClusterMoveNeedsOperator(t *testing.T) {
	p := newClusterAuthPlane(t)
	user, _, err := p.tokens.minter.Mint("t1", "alice", []auth.Permission{{Action: auth.ActionAdmin, Resource: "t1/*/*"}})
	require.NoError(t, err)
	op, _, err := p.tokens.minter.Mint("ops", "root", []auth.Permission{{Action: auth.ActionAdmin, Resource: "ops/*/*"}})
	require.NoError(t, err)
	r := p.main.doToken(t, "POST", "/v1/shards/t1/ns/s/0/move", `{"from":"a","to":"b"}`, user)
	require.Equal(t, http.StatusForbidden, r.status, r.body)
	r = p.main.doToken(t, "POST", "/v1/shards/t1/ns/s/0/leader", `{"to":"b"}`, user)
	require.Equal(t, http.StatusForbidden, r.status, r.body)
	r = p.main.doToken(t, "POST", "/v1/shards/t1/ns/s/0/move", `{"from":"a","to":"b"}`, op)
	require.Equal(t, http.StatusNotFound, r.status, "authorized, and there is no such shard: %s", r.body)
	r = p.main.doToken(t, "POST", "/v1/shards/t1/ns/s/0/move", `{"from":"a","to":"b"}`, "")
	require.Equal(t, http.StatusUnauthorized, r.status, r.body)
}
