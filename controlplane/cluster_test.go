package controlplane

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// newClusterInstance serves st with the bootstrap token and a placer
// granting lease.
func newClusterInstance(t testing.TB, st Store, lease time.Duration) *instance {
	return newClusterInstanceWith(t, st, PlacerConfig{LeaseTTL: lease})
}

// newClusterInstanceWith is newClusterInstance with the placer's config
// (its RetryDelay short).
func newClusterInstanceWith(t testing.TB, st Store, cfg PlacerConfig) *instance {
	cfg.RetryDelay = 50 * time.Millisecond
	p, err := NewPlacer(st, cfg)
	require.NoError(t, err)
	auth, err := NewBootstrapAuthorizer(testToken)
	require.NoError(t, err)
	srv, err := New(Config{Store: st, Authorizer: auth, Placer: p})
	require.NoError(t, err)
	in := &instance{srv: srv, url: newHTTPServer(t, srv)}
	t.Cleanup(func() { srv.Close(); p.Close() })
	return in
}

func (in *instance) register(t testing.TB, id string) api.RegisterResponse {
	t.Helper()
	return in.registerIn(t, id, "")
}

// registerIn registers id in zone ("": none).
func (in *instance) registerIn(t testing.TB, id, zone string) api.RegisterResponse {
	t.Helper()
	var resp api.RegisterResponse
	body := fmt.Sprintf(`{"id":%q,"quic_addr":"127.0.0.1:7%03d","zone":%q}`, id, len(id), zone)
	in.mustDo(t, http.StatusOK, "POST", "/v1/members", body).decode(t, &resp)
	return resp
}

// placementAfter long-polls for the placement after version after.
func (in *instance) placementAfter(t testing.TB, after int64, wait time.Duration) cluster.Placement {
	t.Helper()
	var p cluster.Placement
	in.mustDo(t, http.StatusOK, "GET", fmt.Sprintf("/v1/placement?after=%d&wait_ms=%d", after, wait.Milliseconds()), "").decode(t, &p)
	return p
}

// awaitPlacement long-polls until ok holds, for at most d.
func (in *instance) awaitPlacement(t testing.TB, d time.Duration, ok func(cluster.Placement) bool) cluster.Placement {
	t.Helper()
	deadline := time.Now().Add(d)
	var p cluster.Placement
	for time.Now().Before(deadline) {
		p = in.placementAfter(t, p.Version, time.Until(deadline))
		if p.Version != 0 && ok(p) {
			return p
		}
	}
	t.Fatalf("placement did not get there within %v; last: %+v", d, p)
	return p
}

func ownerCounts(p cluster.Placement) map[string]int {
	c := map[string]int{}
	for _, a := range p.Assignments {
		c[a.Owner]++
	}
	return c
}

// The membership endpoints: validation, register, keepalive, list,
// leave, and the JSON errors of an unknown member.
func TestClusterMembersAPI(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstance(t, open(t), 2*time.Second)
		for _, body := range []string{`{"id":"a/b","quic_addr":"127.0.0.1:1"}`, `{"id":"a","quic_addr":"nohost"}`,
			`{"id":"a","quic_addr":"127.0.0.1:0"}`, `{"id":"a"}`, `{"id":"a","quic_addr":"127.0.0.1:1","extra":1}`} {
			in.mustDo(t, http.StatusBadRequest, "POST", "/v1/members", body)
		}
		reg := in.register(t, "b1")
		require.Equal(t, cluster.Member{ID: "b1", QUICAddr: "127.0.0.1:7002", Live: true}, reg.Member)
		require.Equal(t, int64(2000), reg.LeaseTTLMS)
		var ka api.KeepAliveResponse
		in.mustDo(t, http.StatusOK, "POST", "/v1/members/b1/keepalive", "").decode(t, &ka)
		require.Equal(t, int64(2000), ka.LeaseTTLMS)
		var ms api.MembersResponse
		in.mustDo(t, http.StatusOK, "GET", "/v1/members", "").decode(t, &ms)
		require.Equal(t, []cluster.Member{reg.Member}, ms.Members)

		in.mustDo(t, http.StatusOK, "DELETE", "/v1/members/b1", "")
		var e api.ErrorBody
		in.mustDo(t, http.StatusNotFound, "POST", "/v1/members/b1/keepalive", "").decode(t, &e)
		require.Equal(t, "not_found", e.Code)
		require.Contains(t, e.Message, "register again")
		in.mustDo(t, http.StatusNotFound, "DELETE", "/v1/members/b1", "")
		in.mustDo(t, http.StatusOK, "GET", "/v1/members", "").decode(t, &ms)
		require.Empty(t, ms.Members)
		in.mustDo(t, http.StatusBadRequest, "GET", "/v1/placement?after=x", "")
	})
}

// Placement follows members and streams: 12 shards on three brokers are
// 4/4/4; a fourth broker takes exactly three; deleting the stream empties
// the placement. A long-poll answers as soon as the version moves.
func TestClusterPlacementFollowsMembersAndStreams(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newClusterInstance(t, open(t), 2*time.Second)
		in.seed(t)
		for _, id := range []string{"a", "b", "c"} {
			in.register(t, id)
		}
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"s","shards":12}`)
		p := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 12 && len(p.Members) == 3 })
		require.Equal(t, map[string]int{"a": 4, "b": 4, "c": 4}, ownerCounts(p))

		start := time.Now()
		got := make(chan cluster.Placement, 1)
		go func() {
			var q cluster.Placement
			r := in.do(t, "GET", fmt.Sprintf("/v1/placement?after=%d&wait_ms=10000", p.Version), "")
			json.Unmarshal([]byte(r.body), &q)
			got <- q
		}()
		in.register(t, "d")
		q := <-got
		require.Less(t, time.Since(start), 5*time.Second)
		require.Greater(t, q.Version, p.Version)
		q = in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Members) == 4 })
		require.Equal(t, map[string]int{"a": 3, "b": 3, "c": 3, "d": 3}, ownerCounts(q))
		moved := 0
		for i, a := range q.Assignments {
			if p.Assignments[i].Owner != a.Owner {
				moved++
				require.Equal(t, "d", a.Owner, "only the newcomer takes shards")
			}
		}
		require.Equal(t, 3, moved)

		in.mustDo(t, http.StatusOK, "DELETE", streamsURL+"/s", "")
		in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 0 })
	})
}

// A member whose keepalives stop is gone within its lease plus a little:
// its ephemeral shards move to the live member, its durable shards stay
// with it, listed with live=false.
func TestClusterLeaseLapseMovesEphemeralShards(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		const lease = 1 * time.Second
		in := newClusterInstance(t, open(t), lease)
		in.seed(t)
		ttl := time.Duration(in.register(t, "keep").LeaseTTLMS) * time.Millisecond
		// Keep "keep" alive; "lapse" never gets a keepalive.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(ttl / 4):
					rawPost(in.url+"/v1/members/keep/keepalive", "")
				}
			}
		}()
		in.register(t, "lapse")
		lapsed := time.Now()
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"eph","shards":4}`)
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"dur","shards":4,"durable":true}`)
		before := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool {
			c := ownerCounts(p)
			return c["keep"] == 4 && c["lapse"] == 4
		})
		after := in.awaitPlacement(t, ttl+3*time.Second, func(p cluster.Placement) bool { return len(p.Members) == 2 && !p.Members[1].Live })
		t.Logf("lease %v lapsed; placement moved after %v", ttl, time.Since(lapsed))
		require.Less(t, time.Since(lapsed), ttl+2*time.Second)
		require.WithinDuration(t, time.Now(), after.Members[1].DownSince, ttl+3*time.Second, "an absent member's DownSince is when the placer found it gone")
		after.Members[1].DownSince = time.Time{}
		require.Equal(t, cluster.Member{ID: "lapse", QUICAddr: "127.0.0.1:7005", Live: false}, after.Members[1])
		for i, a := range after.Assignments {
			if a.Durable {
				require.Equal(t, before.Assignments[i].Owner, a.Owner, "durable %s stays with its owner", a.Shard)
			} else {
				require.Equal(t, "keep", a.Owner)
			}
		}
		require.Equal(t, map[string]int{"keep": 6, "lapse": 2}, ownerCounts(after))

		// It comes back: a keepalive says register again; registering
		// makes it live with its durable shards, and it takes back half of
		// the ephemeral ones (two move, no more).
		in.mustDo(t, http.StatusNotFound, "POST", "/v1/members/lapse/keepalive", "")
		in.register(t, "lapse")
		back := in.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Members) == 2 && p.Members[1].Live })
		require.Equal(t, map[string]int{"keep": 4, "lapse": 4}, ownerCounts(back))
		moved := 0
		for i, a := range back.Assignments {
			if after.Assignments[i].Owner != a.Owner {
				moved++
			}
		}
		require.Equal(t, 2, moved)
	})
}

// forEachClusterBackend runs f on each store backend that keeps
// membership.
func forEachClusterBackend(t *testing.T, f func(t *testing.T, open func(testing.TB) Store)) {
	forEachBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		if _, ok := open(t).(MemberStore); !ok {
			t.Skip("this backend keeps no membership yet")
		}
		f(t, open)
	})
}
