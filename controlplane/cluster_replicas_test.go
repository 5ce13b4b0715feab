package controlplane

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// A broker registers with its zone, which membership and placement show;
// a zone is a name like any other.
func TestClusterMemberZone(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstance(t, open(t), 2*time.Second)
		var e api.ErrorBody
		in.mustDo(t, http.StatusBadRequest, "POST", "/v1/members", `{"id":"a","quic_addr":"127.0.0.1:1","zone":"eu/west"}`).decode(t, &e)
		require.Contains(t, e.Message, `zone "eu/west" has '/' at byte 2`)
		reg := in.registerIn(t, "a", "eu-west-1a")
		require.Equal(t, cluster.Member{ID: "a", QUICAddr: "127.0.0.1:7001", Zone: "eu-west-1a", Live: true}, reg.Member)
		var ms api.MembersResponse
		in.mustDo(t, http.StatusOK, "GET", "/v1/members", "").decode(t, &ms)
		require.Equal(t, []cluster.Member{reg.Member}, ms.Members)
		p := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Members) == 1 })
		require.Equal(t, "eu-west-1a", p.Members[0].Zone)
	})
}

// A replicated stream needs as many live brokers as replicas at creation,
// gets a quorum ack by default, and its shards are placed on replica sets
// spread over the brokers' zones, the owner first.
func TestClusterReplicatedStream(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstance(t, open(t), 2*time.Second)
		in.seed(t)
		refused := func(body, want string) {
			t.Helper()
			var e api.ErrorBody
			in.mustDo(t, http.StatusBadRequest, "POST", streamsURL, body).decode(t, &e)
			require.Equal(t, "bad_request", e.Code)
			require.Equal(t, want, e.Message)
		}
		in.registerIn(t, "a", "z1")
		refused(`{"stream":"r","shards":6,"durable":true,"replicas":3}`, "stream needs 3 replicas; 1 broker is live")
		in.registerIn(t, "b", "z2")
		refused(`{"stream":"r","shards":6,"durable":true,"replicas":3}`, "stream needs 3 replicas; 2 brokers are live")
		in.registerIn(t, "c", "z3")
		in.registerIn(t, "d", "z1")
		refused(`{"stream":"r5","durable":true,"replicas":5}`, "stream needs 5 replicas; 4 brokers are live")

		var st api.Stream
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"r","shards":6,"durable":true,"replicas":3}`).decode(t, &st)
		require.Equal(t, 3, st.Replicas)
		require.Equal(t, api.AckQuorum, st.Ack)
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"l","durable":true,"replicas":3,"ack":"leader"}`).decode(t, &st)
		require.Equal(t, api.AckLeader, st.Ack)
		// One replica is no replication: stored as before replication.
		r := in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"one","shards":2,"replicas":1}`)
		require.NotContains(t, r.body, "replicas")
		require.NotContains(t, r.body, "ack")

		p := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 9 && len(p.Members) == 4 })
		x := cluster.NewIndex(p)
		for _, a := range p.Assignments {
			if a.Stream == "one" {
				require.Empty(t, a.Replicas)
				continue
			}
			require.Len(t, a.Replicas, 3, "%s", a.Shard)
			require.Equal(t, a.Replicas[0], a.Owner)
			zones := map[string]bool{}
			for _, m := range x.Replicas(a.Shard) {
				zones[m.Zone] = true
			}
			require.Len(t, zones, 3, "%s: %v spans every zone", a.Shard, a.Replicas)
		}

		// A broker leaving changes no replica set: it stays in its sets,
		// listed as not live.
		require.NotEmpty(t, x.ReplicaOf("d"))
		in.mustDo(t, http.StatusOK, "DELETE", "/v1/members/d", "")
		q := in.awaitPlacement(t, 5*time.Second, func(q cluster.Placement) bool {
			d, listed := cluster.NewIndex(q).Member("d")
			return listed && !d.Live
		})
		for i, a := range q.Assignments {
			if a.Replicated() {
				require.True(t, a.Equal(p.Assignments[i]), "%s moved: %v -> %v", a.Shard, p.Assignments[i].Replicas, a.Replicas)
			}
		}
	})
}
