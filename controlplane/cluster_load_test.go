package controlplane

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// The store keeps each member's last load report: a report replaces the
// previous one, none (nil) keeps it, it outlives the member's leave, and a
// report does not wake Notify (load alone never recomputes).
func TestMemberStoreLoads(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		ms := open(t).(MemberStore)
		ctx := context.Background()
		for _, id := range []string{"a", "b"} {
			_, err := ms.Register(ctx, cluster.Member{ID: id, QUICAddr: "127.0.0.1:7000"}, 30*time.Second)
			require.NoError(t, err)
		}
		report := []cluster.ShardLoad{{Shard: cluster.Shard{Tenant: "t1", Namespace: "ns", Stream: "s", Shard: 3}, BytesPerSec: 1234}}
		changed, err := ms.Notify(ctx)
		require.NoError(t, err)
		_, err = ms.KeepAlive(ctx, "a", report)
		require.NoError(t, err)
		_, err = ms.KeepAlive(ctx, "b", nil)
		require.NoError(t, err)
		select {
		case <-changed:
			t.Fatal("a load report woke Notify")
		case <-time.After(300 * time.Millisecond):
		}
		loads, err := ms.Loads(ctx)
		require.NoError(t, err)
		require.Equal(t, map[string][]cluster.ShardLoad{"a": report}, loads)

		_, err = ms.KeepAlive(ctx, "a", nil) // no report: the last one stays
		require.NoError(t, err)
		loads, err = ms.Loads(ctx)
		require.NoError(t, err)
		require.Equal(t, report, loads["a"])
		_, err = ms.KeepAlive(ctx, "a", []cluster.ShardLoad{}) // an empty report replaces it
		require.NoError(t, err)
		loads, err = ms.Loads(ctx)
		require.NoError(t, err)
		require.Empty(t, loads["a"])

		_, err = ms.KeepAlive(ctx, "b", report)
		require.NoError(t, err)
		require.NoError(t, ms.Leave(ctx, "b"))
		loads, err = ms.Loads(ctx)
		require.NoError(t, err)
		require.Equal(t, report, loads["b"], "a report outlives its member")
	})
}

// Through the API: keepalives carry load reports (validated; an empty body
// still works), reports alone change no placement, and when a member
// leaves, its shards go heaviest first to the least-loaded survivor.
func TestClusterLoadReportsSteerPlacement(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstance(t, open(t), 30*time.Second)
		in.seed(t)
		for _, id := range []string{"a", "b", "c"} {
			in.register(t, id)
		}
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"s","shards":12}`)
		p := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 12 && len(p.Members) == 3 })

		for _, body := range []string{`{"load":[{"tenant":"t1","namespace":"ns","stream":"s","shard":0,"bytes_per_s":-1}]}`,
			`{"load":[],"extra":1}`, `{"load":`} {
			in.mustDo(t, http.StatusBadRequest, "POST", "/v1/members/a/keepalive", body)
		}
		in.mustDo(t, http.StatusOK, "POST", "/v1/members/a/keepalive", "")
		in.mustDo(t, http.StatusOK, "POST", "/v1/members/a/keepalive", `{}`)

		// a is busy (1000 B/s per shard), b nearly idle (1 B/s per shard).
		// c's four shards weigh 500, 300, 1 and 5 (in shard order).
		rate := map[string]int64{"a": 1000, "b": 1}
		cRates := []int64{500, 300, 1, 5}
		reports := map[string][]cluster.ShardLoad{}
		var cShards []cluster.Shard
		for _, as := range p.Assignments {
			r := rate[as.Owner]
			if as.Owner == "c" {
				r = cRates[len(cShards)]
				cShards = append(cShards, as.Shard)
			}
			reports[as.Owner] = append(reports[as.Owner], cluster.ShardLoad{Shard: as.Shard, BytesPerSec: r})
		}
		require.Len(t, cShards, 4)
		for id, r := range reports {
			raw, err := json.Marshal(api.KeepAliveRequest{Load: r})
			require.NoError(t, err)
			in.mustDo(t, http.StatusOK, "POST", "/v1/members/"+id+"/keepalive", string(raw))
		}
		same := in.placementAfter(t, p.Version, 500*time.Millisecond)
		require.Equal(t, p, same, "load reports alone change nothing")

		in.mustDo(t, http.StatusOK, "DELETE", "/v1/members/c", "")
		q := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Members) == 2 })
		require.Equal(t, map[string]int{"a": 6, "b": 6}, ownerCounts(q))
		// Heaviest first to the least loaded with room: 500 and 300 to b
		// (4 B/s, then 504), then 5 and 1 to a. Round-robin (no load, or
		// no report of c) would alternate a, b, a, b or b, a, b, a.
		got := map[cluster.Shard]string{}
		for i, as := range q.Assignments {
			if p.Assignments[i].Owner == "c" {
				got[as.Shard] = as.Owner
				continue
			}
			require.Equal(t, p.Assignments[i].Owner, as.Owner, "only c's shards move")
		}
		require.Equal(t, map[cluster.Shard]string{cShards[0]: "b", cShards[1]: "b", cShards[2]: "a", cShards[3]: "a"}, got)
	})
}

// withLoads gives each shard the rate its owner in the stored placement
// reported: a report by another member (the shard moved since) does not
// count, and a shard nobody reported weighs 0.
func TestWithLoadsTakesTheOwnersReport(t *testing.T) {
	sh := func(i int) cluster.Shard { return cluster.Shard{Tenant: "t1", Namespace: "ns", Stream: "s", Shard: i} }
	stored := cluster.Placement{Assignments: []cluster.Assignment{{Shard: sh(0), Owner: "a"}, {Shard: sh(1), Owner: "b"}}}
	specs := []cluster.ShardSpec{{Shard: sh(0)}, {Shard: sh(1)}, {Shard: sh(2)}}
	withLoads(specs, stored, map[string][]cluster.ShardLoad{
		"a": {{Shard: sh(0), BytesPerSec: 10}, {Shard: sh(1), BytesPerSec: 99}}, // a owned 1 before: stale
		"b": {{Shard: sh(1), BytesPerSec: 20}},
		"c": {{Shard: sh(2), BytesPerSec: 30}}, // 2 is new: c's report is not its owner's
	})
	require.Equal(t, []int64{10, 20, 0}, []int64{specs[0].Load, specs[1].Load, specs[2].Load})

	// A replicated shard: any replica's report counts (the highest), the
	// leader raft chose being any of them.
	stored.Assignments = append(stored.Assignments, cluster.Assignment{Shard: sh(2), Owner: "a", Replicas: []string{"a", "b", "c"}})
	withLoads(specs, stored, map[string][]cluster.ShardLoad{
		"b": {{Shard: sh(2), BytesPerSec: 5}},
		"c": {{Shard: sh(2), BytesPerSec: 40}},
		"d": {{Shard: sh(2), BytesPerSec: 99}}, // not a replica
	})
	require.Equal(t, int64(40), specs[2].Load)
}
