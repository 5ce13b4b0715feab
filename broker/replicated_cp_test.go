package broker_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/testutil"
	"github.com/felixmq/felix/segment"
)

const cpToken = "bootstrap-token-for-replicated-tests"

// cpCluster is a raftCluster whose placement comes from a real control
// plane (memory store, placer) that the brokers register with and report
// to, as cmd/felix-broker wires them.
type cpCluster struct {
	*raftCluster
	url    string
	agents []*api.Agent
	watch  []*api.Watcher
}

// startCPCluster starts a control plane and brokers b1..bn, the first
// three of them registered (start the others with join); rf3 is created
// replicated on them.
func startCPCluster(t *testing.T, n int, cfg controlplane.PlacerConfig) *cpCluster {
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	require.NoError(t, err)
	cfg.RetryDelay = 20 * time.Millisecond
	placer, err := controlplane.NewPlacer(st, cfg)
	require.NoError(t, err)
	auth, err := controlplane.NewBootstrapAuthorizer(cpToken)
	require.NoError(t, err)
	srv, err := controlplane.New(controlplane.Config{Store: st, Authorizer: auth, Placer: placer})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close(); placer.Close(); st.Close() })

	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	rc := &raftCluster{t: t, cert: cert, tls: &tls.Config{RootCAs: pool}}
	c := &cpCluster{raftCluster: rc, url: hs.URL}
	for i := range n {
		rc.ids = append(rc.ids, fmt.Sprintf("b%d", i+1))
		rc.dirs = append(rc.dirs, t.TempDir())
		rc.nodes = append(rc.nodes, nil)
		rc.started = append(rc.started, false)
		c.agents = append(c.agents, nil)
		c.watch = append(c.watch, nil)
	}
	for i := range 3 {
		c.join(i)
	}
	for _, call := range []struct{ path, body string }{
		{"/v1/tenants", `{"tenant":"t1"}`},
		{"/v1/tenants/t1/namespaces", `{"namespace":"default"}`},
		{"/v1/tenants/t1/namespaces/default/streams", `{"stream":"rf3","durable":true,"fsync":"on_commit","replicas":3}`},
	} {
		code, body := testutil.Call(t, "POST", c.url+call.path, call.body, cpToken)
		require.Equal(t, 201, code, body)
	}
	return c
}

// join starts broker i, registers it and has it follow the placement.
func (c *cpCluster) join(i int) {
	c.start(i)
	h := c.nodes[i]
	w, err := api.NewWatcher(api.WatcherConfig{URL: c.url, Token: cpToken, Wait: 5 * time.Second, MinBackoff: 10 * time.Millisecond,
		OnChange: func(x *cluster.Index) { h.b.SetPlacement(&x.Placement) }})
	require.NoError(c.t, err)
	a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: c.url, Token: cpToken, RetryDelay: 20 * time.Millisecond,
		Member:   cluster.Member{ID: c.ids[i], QUICAddr: h.addr},
		Replicas: h.b.ReplicaReports, ReportNow: h.b.ReplicasChanged()})
	require.NoError(c.t, err)
	c.agents[i], c.watch[i] = a, w
	c.t.Cleanup(func() { a.Close(); w.Close() })
}

// lose stops broker i (its agent leaves) and deletes its data directory:
// a host gone for good.
func (c *cpCluster) lose(i int) {
	c.agents[i].Close()
	c.watch[i].Close()
	c.stop(i)
	require.NoError(c.t, os.RemoveAll(c.dirs[i]))
}

// placement returns the control plane's current placement.
func (c *cpCluster) placement() cluster.Placement {
	code, body := testutil.Call(c.t, "GET", c.url+"/v1/placement", "", cpToken)
	require.Equal(c.t, 200, code, body)
	var p cluster.Placement
	require.NoError(c.t, json.Unmarshal([]byte(body), &p))
	return p
}

func rf3Assignment(p cluster.Placement) cluster.Assignment {
	a, _ := cluster.NewIndex(p).Assignment(cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "rf3"})
	return a
}

// TestReplacedMemberRejoinsThroughTheControlPlane: with the control plane
// in the loop, a broker lost for good (stopped, its data deleted) is
// replaced once ReplaceAfter passes: the placer puts the spare b4 in the
// set, the leader adds it as a learner, it catches up and is promoted,
// the lost member is removed, and the leader's reports bring the
// placement's group back to three in-sync voters; b4's log holds the same
// events as the others.
func TestReplacedMemberRejoinsThroughTheControlPlane(t *testing.T) {
	c := startCPCluster(t, 4, controlplane.PlacerConfig{LeaseTTL: time.Second, ReplaceAfter: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var seen []cluster.Assignment // the rf3 groups the placement showed, in order
	var mu sync.Mutex
	record := func(a cluster.Assignment) {
		mu.Lock()
		defer mu.Unlock()
		a.Owner, a.Replicas = "", slices.Sorted(slices.Values(a.Replicas))
		if len(seen) == 0 || !seen[len(seen)-1].Equal(a) {
			seen = append(seen, a)
		}
	}
	w, err := api.NewWatcher(api.WatcherConfig{URL: c.url, Token: cpToken, Wait: 5 * time.Second, MinBackoff: 10 * time.Millisecond,
		OnChange: func(x *cluster.Index) { record(rf3Assignment(x.Placement)) }})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })

	require.Eventually(t, func() bool { return rf3Assignment(c.placement()).AllInSync() }, 20*time.Second, 20*time.Millisecond,
		"the leader's report shows three in-sync voters")
	publish := func(n int, tag string) {
		t.Helper()
		p, err := c.nodes[c.leader()].dialWith(t, client.Config{TLS: c.tls}).NewPublisher(ctx, "default", "rf3")
		require.NoError(t, err)
		for k := range n {
			require.NoError(t, p.PublishShardAsync(0, [][]byte{fmt.Appendf(nil, "%s-%d", tag, k)}).Wait(ctx))
		}
		p.Close(ctx)
	}
	publish(50, "before")
	c.join(3)
	lost := slices.Index(c.ids, rf3Assignment(c.placement()).Replicas[2]) // a follower, preferably
	if lost == c.leader() {
		lost = slices.Index(c.ids, rf3Assignment(c.placement()).Replicas[1])
	}
	c.lose(lost)
	start := time.Now()
	want := slices.Sorted(slices.Values(slices.DeleteFunc(slices.Clone(c.ids), func(id string) bool { return id == c.ids[lost] })))
	require.Eventually(t, func() bool {
		a := rf3Assignment(c.placement())
		return slices.Equal(a.Voters, want) && slices.Equal(a.InSync, want) && len(a.Learners) == 0
	}, 30*time.Second, 20*time.Millisecond)
	t.Logf("back to 3 in-sync replicas %v after %v (ReplaceAfter 1 s)", want, time.Since(start))
	mu.Lock()
	var steps []string
	for _, a := range seen {
		steps = append(steps, fmt.Sprintf("replicas=%v voters=%v learners=%v in_sync=%v", a.Replicas, a.Voters, a.Learners, a.InSync))
	}
	t.Logf("groups the placement showed:\n%s", strings.Join(steps, "\n"))
	// In order: under-replicated (the lost member silent), b4 a learner,
	// b4 a voter in sync beside the lost one, the lost one removed.
	under := slices.IndexFunc(seen, func(a cluster.Assignment) bool { return len(a.Voters) == 3 && len(a.InSync) == 2 })
	learner := slices.IndexFunc(seen, func(a cluster.Assignment) bool { return slices.Equal(a.Learners, []string{"b4"}) })
	promoted := slices.IndexFunc(seen, func(a cluster.Assignment) bool { return len(a.Voters) == 4 && slices.Contains(a.InSync, "b4") })
	require.True(t, 0 <= under && under < learner && learner < promoted, "under-replicated %d, learner %d, promoted %d:\n%s",
		under, learner, promoted, strings.Join(steps, "\n"))
	mu.Unlock()

	publish(10, "after")
	survivors := slices.DeleteFunc([]int{0, 1, 2, 3}, func(i int) bool { return i == lost })
	require.Eventually(t, func() bool {
		var cs []uint64
		for _, i := range survivors {
			cs = append(cs, c.nodes[i].b.Stats().Streams[0].Shards[0].Replica.Commit)
		}
		return cs[0] == cs[1] && cs[1] == cs[2]
	}, 10*time.Second, 20*time.Millisecond)
	for _, i := range survivors {
		c.agents[i].Close()
		c.stop(i)
	}
	events := c.events(survivors[0])
	require.Len(t, events, 60)
	for _, i := range survivors[1:] {
		require.Equal(t, events, c.events(i))
	}
	_, err = os.Stat(filepath.Join(c.dirs[lost], segment.ShardDirName("t1", "default", "rf3", 0)))
	require.True(t, os.IsNotExist(err))
}
