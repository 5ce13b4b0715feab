package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/testutil"
)

const token = "bootstrap-token-for-cluster-tests"

// plane is a real control plane (memory store) over HTTP, admitting the
// bootstrap token.
type plane struct {
	url   string
	store *controlplane.MemoryStore
}

func newPlane(t *testing.T, lease time.Duration) *plane {
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	require.NoError(t, err)
	placer, err := controlplane.NewPlacer(st, controlplane.PlacerConfig{LeaseTTL: lease})
	require.NoError(t, err)
	auth, err := controlplane.NewBootstrapAuthorizer(token)
	require.NoError(t, err)
	srv, err := controlplane.New(controlplane.Config{Store: st, Authorizer: auth, Placer: placer})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close(); placer.Close(); st.Close() })
	return &plane{url: hs.URL, store: st}
}

// call sends an API request with the bootstrap token and requires want.
func (p *plane) call(t *testing.T, want int, method, path, body string) string {
	t.Helper()
	code, raw := testutil.Call(t, method, p.url+path, body, token)
	require.Equal(t, want, code, "%s %s: %s", method, path, raw)
	return raw
}

// stream creates t/ns/name with n shards (and t, ns on first use).
func (p *plane) stream(t *testing.T, name string, n int, durable bool) {
	t.Helper()
	if !strings.Contains(p.call(t, 200, "GET", "/v1/tenants", ""), `"t"`) {
		p.call(t, 201, "POST", "/v1/tenants", `{"tenant":"t"}`)
		p.call(t, 201, "POST", "/v1/tenants/t/namespaces", `{"namespace":"ns"}`)
	}
	body := fmt.Sprintf(`{"stream":%q,"shards":%d,"durable":%t}`, name, n, durable)
	p.call(t, 201, "POST", "/v1/tenants/t/namespaces/ns/streams", body)
}

func (p *plane) agent(t *testing.T, id string) *api.Agent {
	t.Helper()
	a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: p.url, Token: token,
		Member: cluster.Member{ID: id, QUICAddr: "127.0.0.1:7" + id[len(id)-1:] + "00"}})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

func (p *plane) watcher(t *testing.T) *api.Watcher {
	t.Helper()
	w, err := api.NewWatcher(api.WatcherConfig{URL: p.url, Token: token, Wait: 5 * time.Second, MinBackoff: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

// until waits for the watcher's placement to satisfy ok, for at most d.
func until(t *testing.T, w *api.Watcher, d time.Duration, ok func(*cluster.Index) bool) *cluster.Index {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var after int64
	for {
		x, err := w.Next(ctx, after)
		require.NoError(t, err, "placement never satisfied the condition; last: %+v", w.Current())
		if ok(x) {
			return x
		}
		after = x.Version
	}
}

func owners(x *cluster.Index) map[string]int {
	c := map[string]int{}
	for _, a := range x.Assignments {
		c[a.Owner]++
	}
	return c
}

// An Agent registers, keeps its lease alive past several TTLs, registers
// again after its lease is gone, and leaves on Close; a Watcher sees each
// step as a new placement.
func TestAgentAndWatcher(t *testing.T) {
	p := newPlane(t, 300*time.Millisecond)
	w := p.watcher(t)
	p.stream(t, "s", 4, false)
	a := p.agent(t, "b1")
	require.Equal(t, 300*time.Millisecond, a.LeaseTTL())
	x := until(t, w, 5*time.Second, func(x *cluster.Index) bool { return owners(x)["b1"] == 4 })
	m, ok := x.Owner(cluster.Shard{Tenant: "t", Namespace: "ns", Stream: "s", Shard: 0})
	require.True(t, ok)
	require.Equal(t, cluster.Member{ID: "b1", QUICAddr: "127.0.0.1:7100", Live: true}, m)

	// Three TTLs later it is still there: the keepalives work.
	time.Sleep(900 * time.Millisecond)
	require.Contains(t, p.call(t, 200, "GET", "/v1/members", ""), `"b1"`)

	// Removed behind its back (as a lapsed lease is), it registers again.
	p.call(t, 200, "DELETE", "/v1/members/b1", "")
	until(t, w, 5*time.Second, func(x *cluster.Index) bool { return owners(x)["b1"] == 0 })
	until(t, w, 5*time.Second, func(x *cluster.Index) bool { return owners(x)["b1"] == 4 })

	b := p.agent(t, "b2")
	until(t, w, 5*time.Second, func(x *cluster.Index) bool { return owners(x)["b1"] == 2 && owners(x)["b2"] == 2 })
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	until(t, w, 5*time.Second, func(x *cluster.Index) bool { return owners(x)["b1"] == 4 })
	require.NoError(t, a.Close())
	require.NotContains(t, p.call(t, 200, "GET", "/v1/members", ""), `"b1"`)
}

// With Load set, every keepalive carries the broker's current report (an
// empty one when it has nothing to report), and the control plane keeps
// the last one with the member.
func TestAgentReportsLoad(t *testing.T) {
	p := newPlane(t, 300*time.Millisecond)
	var calls atomic.Int64
	report := []cluster.ShardLoad{{Shard: cluster.Shard{Tenant: "t", Namespace: "ns", Stream: "s", Shard: 1}, BytesPerSec: 4096}}
	a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: p.url, Token: token,
		Member: cluster.Member{ID: "b1", QUICAddr: "127.0.0.1:7100"},
		Load: func() []cluster.ShardLoad {
			if calls.Add(1) == 1 {
				return report
			}
			return nil
		}})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	require.Eventually(t, func() bool {
		loads, err := p.store.Loads(context.Background())
		return err == nil && len(loads["b1"]) == 1 && loads["b1"][0] == report[0]
	}, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		loads, err := p.store.Loads(context.Background())
		_, reported := loads["b1"]
		return err == nil && reported && len(loads["b1"]) == 0 && calls.Load() >= 2
	}, 5*time.Second, 10*time.Millisecond, "a nil report is sent as an empty one")
}

// An Agent registers its member's zone, and the placement spreads a
// replicated stream's replicas over the zones of the brokers registered so.
func TestAgentRegistersZone(t *testing.T) {
	p := newPlane(t, 2*time.Second)
	w := p.watcher(t)
	for i, zone := range []string{"z1", "z2", "z3", "z1"} {
		id := fmt.Sprintf("b%d", i+1)
		a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: p.url, Token: token,
			Member: cluster.Member{ID: id, QUICAddr: fmt.Sprintf("127.0.0.1:7%d00", i+1), Zone: zone}})
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
	}
	var ms api.MembersResponse
	require.NoError(t, json.Unmarshal([]byte(p.call(t, 200, "GET", "/v1/members", "")), &ms))
	require.Len(t, ms.Members, 4)
	for i, zone := range []string{"z1", "z2", "z3", "z1"} {
		require.Equal(t, zone, ms.Members[i].Zone, ms.Members[i].ID)
	}
	p.stream(t, "s", 1, true) // creates t and ns
	p.call(t, 201, "POST", "/v1/tenants/t/namespaces/ns/streams", `{"stream":"r","shards":4,"durable":true,"replicas":3}`)
	x := until(t, w, 5*time.Second, func(x *cluster.Index) bool { return len(x.ReplicaOf("b1"))+len(x.ReplicaOf("b4")) == 4 })
	for n := range 4 {
		zones := map[string]bool{}
		for _, m := range x.Replicas(cluster.Shard{Tenant: "t", Namespace: "ns", Stream: "r", Shard: n}) {
			zones[m.Zone] = true
		}
		require.Equal(t, map[string]bool{"z1": true, "z2": true, "z3": true}, zones, "shard %d", n)
	}
}

// An Agent sends its replica report with each keepalive, at once when
// ReportNow fires (a lease of a minute renews every 20 s otherwise), and a
// report the control plane refuses costs no lease: the keepalive goes
// again without it.
func TestAgentReportsReplicas(t *testing.T) {
	p := newPlane(t, time.Minute)
	sh := cluster.Shard{Tenant: "t", Namespace: "ns", Stream: "r"}
	var bad atomic.Bool
	var sent atomic.Int64
	now := make(chan struct{}, 1)
	a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: p.url, Token: token, RetryDelay: 10 * time.Millisecond,
		Member: cluster.Member{ID: "b1", QUICAddr: "127.0.0.1:7100"}, ReportNow: now,
		Replicas: func() []cluster.ReplicaReport {
			sent.Add(1)
			r := cluster.ReplicaReport{Shard: sh, Leader: "b1", Term: 3, Voters: []string{"b1", "b2", "b3"}, InSync: []string{"b1"}}
			if bad.Load() {
				r.Leader = "b2" // a member reports only its own leaderships
			}
			return []cluster.ReplicaReport{r}
		}})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	reports := func() []cluster.ReplicaReport {
		r, err := p.store.ReplicaReports(context.Background())
		require.NoError(t, err)
		return r["b1"]
	}
	require.Empty(t, reports())
	now <- struct{}{}
	require.Eventually(t, func() bool { return len(reports()) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, uint64(3), reports()[0].Term)

	bad.Store(true)
	n := sent.Load()
	now <- struct{}{}
	require.Eventually(t, func() bool { return sent.Load() > n }, 5*time.Second, 5*time.Millisecond)
	ms, err := p.store.Members(context.Background())
	require.NoError(t, err)
	require.Len(t, ms, 1, "the member stays")
	require.Equal(t, "b1", reports()[0].Leader, "the refused report did not replace the last one")
}
