package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

var six = broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "six"}, Shards: 6}

func dialCluster(t testing.TB, nodes []*clusterNode, bootstrap int) *client.ClusterClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := client.DialCluster(ctx, client.ClusterConfig{
		Config:    client.Config{Tenant: "t1", Token: "dev", TLS: nodes[0].h.clientTLS},
		Bootstrap: []string{nodes[bootstrap].h.addr},
		// Generous for -race on a loaded machine; a closed broker's port
		// answers ICMP unreachable at once anyway.
		DialTimeout: 10 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// subscribeAll subscribes to every shard of six on its owner per p.
func subscribeAll(ctx context.Context, t *testing.T, nodes []*clusterNode, p *cluster.Placement) []*client.Subscription {
	var subs []*client.Subscription
	byID := map[string]*clusterNode{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	for i := range six.Shards {
		m, ok := p.Owner(cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "six", Shard: i})
		require.True(t, ok)
		sub, err := byID[m.ID].h.dial(t).Subscribe(ctx, "default", "six", client.SubscribeOptions{Shard: uint32(i)})
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	return subs
}

func forwarded(nodes []*clusterNode) uint64 {
	var n uint64
	for _, node := range nodes {
		n += node.b.ClusterStats().ForwardedPublishes
	}
	return n
}

// TestClusterClientLearnsOwnersFromAcks: docs/design.md, "Data paths", Cluster:
// the first publish per shard goes to the bootstrap broker, which forwards
// it and names the owner; every later one goes straight to the owner, so
// forwarding stops after one publish per non-owned shard.
func TestClusterClientLearnsOwnersFromAcks(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1", "b2", "b3"}, []broker.StreamSpec{six}, false)
	p := assign(1, members(nodes), six.StreamKey, false, "b1", "b1", "b2", "b2", "b3", "b3")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 30*time.Second)
	subs := subscribeAll(ctx, t, nodes, p)
	cc := dialCluster(t, nodes, 0)
	for round := range 3 {
		for i := range six.Shards {
			require.NoError(t, cc.Publish(ctx, "default", "six", uint32(i), [][]byte{fmt.Appendf(nil, "%d/%d", round, i)}))
		}
		require.Equal(t, uint64(4), forwarded(nodes), "round %d: only the first publish to each of the 4 non-owned shards is forwarded", round)
	}
	for i, sub := range subs {
		for round := range 3 {
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("%d/%d", round, i), string(ev.Payload), "shard %d: every acked publish once, in order", i)
		}
	}
	// Subscribes are routed to the owner too (learned, or not_owner taught).
	sub, err := cc.Subscribe(ctx, "default", "six", client.SubscribeOptions{Shard: 5})
	require.NoError(t, err)
	require.NoError(t, cc.Publish(ctx, "default", "six", 5, [][]byte{[]byte("via cc")}))
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "via cc", string(ev.Payload))
}

// TestClusterClientReroutes: with the placement the ClusterClient never
// needs forwarding; when an owner goes away, publishes to its shards fail
// (owner_unavailable, never acked) until the placement moves them, then
// resume at the new owner.
func TestClusterClientReroutes(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1", "b2", "b3"}, []broker.StreamSpec{six}, false)
	ms := members(nodes)
	p := assign(1, ms, six.StreamKey, false, "b1", "b1", "b2", "b2", "b3", "b3")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 30*time.Second)
	cc := dialCluster(t, nodes, 0)
	cc.SetPlacement(p)
	for i := range six.Shards {
		require.NoError(t, cc.Publish(ctx, "default", "six", uint32(i), [][]byte{[]byte("a")}))
	}
	require.Zero(t, forwarded(nodes))

	// b2 stops: its shards fail until the placement moves them.
	require.NoError(t, nodes[1].b.Close())
	err := cc.Publish(ctx, "default", "six", 2, [][]byte{[]byte("lost?")})
	require.Error(t, err, "no ack from a closed owner")

	ms[1].Live = false
	p2 := assign(2, ms, six.StreamKey, false, "b1", "b1", "b1", "b3", "b3", "b3")
	for _, n := range []*clusterNode{nodes[0], nodes[2]} {
		n.b.SetPlacement(p2)
	}
	cc.SetPlacement(p2)
	require.Equal(t, nodes[0].h.addr, cc.Owner(cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "six", Shard: 2}))
	for i := range six.Shards {
		require.NoError(t, cc.Publish(ctx, "default", "six", uint32(i), [][]byte{[]byte("b")}), "shard %d", i)
	}
	require.Zero(t, forwarded(nodes))
}

// TestClusterClientFollowsLeadershipMoves: docs/cluster.md, "Routing":
// while a replicated shard's leadership moves (step-downs by hand, round
// the replicas) and its replica set moves (the leading replica to a
// fourth broker, which hands the leadership over first), ClusterClients
// publishing acked records in a loop, one following the placement and one
// that knows a bootstrap broker only, see no error: not_leader naming the
// new leader, and shard_unavailable while it is elected, are followed
// inside the client. Every acked record is in the log once, in its
// publisher's order, and the log holds nothing else.
func TestClusterClientFollowsLeadershipMoves(t *testing.T) {
	// The default raft tick: an election timeout of 1 s, so that a loaded
	// machine does not elect for nothing (leadership_lost is an error a
	// client must not retry, and this test's publishers are not
	// idempotent).
	rc := startRaftClusterWith(t, &raftCluster{ids: []string{"b1", "b2", "b3", "b4"}, tick: 100 * time.Millisecond})
	rc.report = true
	ctx := ctxT(t, 2*time.Minute)
	ccfg := client.Config{Tenant: "t1", Token: "dev", TLS: rc.tls}
	var ccs []*client.ClusterClient
	for _, boot := range []int{0, 1} {
		cc, err := client.DialCluster(ctx, client.ClusterConfig{Config: ccfg, Bootstrap: []string{rc.nodes[boot].addr}})
		require.NoError(t, err)
		t.Cleanup(func() { cc.Close() })
		ccs = append(ccs, cc)
	}
	rc.follow = ccs[0].SetPlacement
	rc.place()
	rc.leader() // the group's first election is not what this test is about

	const pubs = 4
	var acked [pubs]atomic.Int64
	// unknown holds, per publisher, the records whose publish ended with
	// an outcome unknown (leadership_lost while the leader handed over): by
	// contract such a record may or may not be in the log, at most once.
	var unknownMu sync.Mutex
	unknown := [pubs]map[int]bool{}
	for p := range pubs {
		unknown[p] = map[int]bool{}
	}
	var failed atomic.Pointer[error]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range pubs {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				err := ccs[p%2].Publish(ctx, "default", "rf3", 0, [][]byte{fmt.Appendf(nil, "p%d-%d", p, n)})
				var be *client.BrokerError
				if errors.As(err, &be) && be.Retry() == wire.OutcomeUnknown {
					unknownMu.Lock()
					unknown[p][n] = true
					unknownMu.Unlock()
					continue
				}
				if err != nil {
					err = fmt.Errorf("publisher %d, record %d: %w", p, n, err)
					failed.CompareAndSwap(nil, &err)
					return
				}
				acked[p].Add(1)
			}
		})
	}
	// progress waits until every publisher had 20 more records acked.
	progress := func(after string) {
		t.Helper()
		var from [pubs]int64
		for p := range pubs {
			from[p] = acked[p].Load()
		}
		require.Eventually(t, func() bool {
			for p := range pubs {
				if acked[p].Load() < from[p]+20 && failed.Load() == nil {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "publishing goes on after %s", after)
		if err := failed.Load(); err != nil {
			t.Fatalf("after %s: %v", after, *err)
		}
	}
	stepDown := func(to int) {
		t.Helper()
		from := -1
		require.Eventually(t, func() bool { // once the target is in sync
			if from = rc.leader(); from == to {
				return true // (the preferred leader took it back meanwhile)
			}
			code, _ := rc.stepDown(from, "", `{"to":"`+rc.ids[to]+`"}`)
			return code == http.StatusOK
		}, 20*time.Second, 20*time.Millisecond, "step-down to %s", rc.ids[to])
		progress(fmt.Sprintf("the step-down %s → %s", rc.ids[from], rc.ids[to]))
	}

	progress("the start")
	for k := range 4 {
		stepDown((rc.leader() + 1 + k%2) % 3)
	}
	// b3 leads, and its replica moves to b4: it hands the leadership over,
	// then leaves the group.
	stepDown(2)
	rc.moveSet("b1", "b2", "b4")
	progress("the move of b3's replica to b4")
	stepDown(3)

	close(stop)
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
	resends := ccs[0].Resends() + ccs[1].Resends()
	require.NotZero(t, resends, "the leadership moved under some publish")
	require.Eventually(t, func() bool { return rc.sameCommit(0, 1, 3) }, 10*time.Second, 20*time.Millisecond)
	for i := range rc.nodes {
		if rc.nodes[i] != nil {
			rc.stop(i)
		}
	}
	records := rc.events(0)
	require.Equal(t, records, rc.events(1))
	require.Equal(t, records, rc.events(3))
	// Per publisher, the log holds its records in order, each once: every
	// acked one, and of those with an outcome unknown, some or none.
	next := map[int]int{}
	inLog := map[int]int64{}
	var unknowns int
	for _, ev := range records {
		_, payload, _ := strings.Cut(ev, ":")
		ps, ns, ok := strings.Cut(payload, "-")
		p, err1 := strconv.Atoi(strings.TrimPrefix(ps, "p"))
		n, err2 := strconv.Atoi(ns)
		require.True(t, ok && err1 == nil && err2 == nil, "a record no publisher sent: %s", ev)
		for ; next[p] < n; next[p]++ {
			require.True(t, unknown[p][next[p]], "%s: p%d-%d, acked, is missing", ev, p, next[p])
		}
		require.Equal(t, next[p], n, "%s: each record of p%d once, in order", ev, p)
		next[p]++
		if unknown[p][n] {
			unknowns++
		} else {
			inLog[p]++
		}
	}
	for p := range pubs {
		require.Equal(t, acked[p].Load(), inLog[p], "publisher %d: every acked record is in the log", p)
	}
	t.Logf("outcome unknown: %d publishes, %d of them in the log", countUnknown(unknown[:]), unknowns)
	t.Logf("%d records acked through step-downs and a replica move; %d publishes sent again after a refusal", len(records), resends)
}

// countUnknown counts the publishes whose outcome was unknown.
func countUnknown(m []map[int]bool) (n int) {
	for _, u := range m {
		n += len(u)
	}
	return n
}
