package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// newRoutingClient is a ClusterClient with no connection: enough to drive
// its routing table.
func newRoutingClient(bootstrap string) *ClusterClient {
	cc := &ClusterClient{cfg: ClusterConfig{Config: Config{Tenant: "t"}, Bootstrap: []string{bootstrap}, Attempts: defaultAttempts}}
	cc.mu.clients = map[string]*Client{}
	cc.mu.pubs = map[clusterPubKey]*Publisher{}
	cc.mu.learned = map[cluster.Shard]string{}
	cc.mu.bootstrap = bootstrap
	return cc
}

func shardN(i int) cluster.Shard {
	return cluster.Shard{Tenant: "t", Namespace: "ns", Stream: "s", Shard: i}
}

// placementOf puts shard i on owner[i] ("" leaves it unassigned); members
// named in down are listed but not live.
func placementOf(owners []string, down ...string) *cluster.Placement {
	p := &cluster.Placement{Version: 1}
	seen := map[string]bool{}
	for i, o := range owners {
		if o == "" {
			continue
		}
		p.Assignments = append(p.Assignments, cluster.Assignment{Shard: shardN(i), Owner: o})
		if !seen[o] {
			seen[o] = true
			p.Members = append(p.Members, cluster.Member{ID: o, QUICAddr: o + ":5000", Live: true})
		}
	}
	for i, m := range p.Members {
		for _, d := range down {
			if m.ID == d {
				p.Members[i].Live = false
			}
		}
	}
	return p
}

// A shard routes to its live owner in the placement, else to the owner an
// ack named, else to the bootstrap broker (which forwards and names the
// owner). A new placement replaces what acks taught.
func TestClusterClientRoutes(t *testing.T) {
	cc := newRoutingClient("boot:5000")
	require.Equal(t, "boot:5000", cc.Owner(shardN(0)), "nothing known: the bootstrap broker")

	cc.mu.learned[shardN(0)] = "b2:5000"
	require.Equal(t, "b2:5000", cc.Owner(shardN(0)), "an ack named the owner")

	cc.SetPlacement(placementOf([]string{"b1", "b3", "", "b4"}, "b4"))
	for _, tc := range []struct {
		shard int
		want  string
		why   string
	}{
		{0, "b1:5000", "the placement wins over what acks taught, which it clears"},
		{1, "b3:5000", "placed"},
		{2, "boot:5000", "unassigned: the bootstrap broker"},
		{3, "boot:5000", "owner not live: where the request lands decides (owner_unavailable)"},
		{9, "boot:5000", "not in the placement"},
	} {
		require.Equal(t, tc.want, cc.Owner(shardN(tc.shard)), tc.why)
	}
	require.Empty(t, cc.mu.learned)

	p := placementOf([]string{"b1"})
	p.Members[0].QUICAddr = ""
	cc.SetPlacement(p)
	require.Equal(t, "boot:5000", cc.Owner(shardN(0)), "an owner without an address cannot be dialled")
	cc.SetPlacement(placementOf([]string{"b1", "b3", "", "b4"}, "b4"))

	cc.mu.learned[shardN(2)] = "b5:5000"
	require.Equal(t, "b5:5000", cc.Owner(shardN(2)), "learned where the placement says nothing")
	cc.SetPlacement(nil)
	require.Equal(t, "boot:5000", cc.Owner(shardN(0)), "no placement, nothing learned")
}

// refusal is a broker's refusal with code, naming owner (nil: none).
func refusal(msg string, code wire.ErrorCode, owner *wire.Owner) *BrokerError {
	return &BrokerError{Message: msg, Err: wire.NewTypedError(code), Owner: owner}
}

// What an answer teaches: an owner named by an ack or by a not_owner
// refusal becomes the route; a failed connection forgets what was learned
// about that broker and its publishers (the next publish re-routes); a
// refusal that says the shard is not served there and names no owner
// steers only that shard away; a refusal for another reason, or the
// caller's context ending a dial, changes nothing.
func TestClusterClientLearnsFromAcks(t *testing.T) {
	owner := &wire.Owner{ID: "b2", Addr: "b2:5000"}
	for _, tc := range []struct {
		name    string
		own     *wire.Owner
		err     error
		learned string // the route of shard 0 afterwards ("" = none learned)
		forgot  bool   // the publisher on the broker that answered is gone
	}{
		{name: "ack naming the owner", own: owner, learned: "b2:5000"},
		{name: "not_owner naming the owner", own: owner, err: refusal("not_owner: shard 0", wire.CodeNotLeader, owner), learned: "b2:5000"},
		{name: "ack naming no owner"},
		{name: "owner_unavailable keeps the route", own: owner, err: refusal("owner_unavailable: down", wire.CodeShardUnavailable, owner)},
		{name: "not_owner naming no owner", err: refusal("not_owner: shard 0", wire.CodeNotLeader, nil)},
		{name: "refused for another reason", err: refusal("forbidden", wire.CodeForbidden, nil)},
		{name: "capability missing", err: fmt.Errorf("%w: shard publishes", ErrNotNegotiated)},
		{name: "dial stopped by the caller", err: context.Canceled},
		{name: "subscribe cursor refused", err: &CursorError{Reason: "too_old"}},
		{name: "connection failed", err: errors.New("stream reset"), forgot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newRoutingClient("boot:5000")
			key := clusterPubKey{"boot:5000", "ns", "s"}
			cc.mu.pubs[key] = &Publisher{}
			other := shardN(7)
			cc.mu.learned[other] = "boot:5000" // learned earlier, same broker
			cc.learn(shardN(0), "boot:5000", tc.own, tc.err)
			got, ok := cc.mu.learned[shardN(0)]
			require.Equal(t, tc.learned != "", ok)
			require.Equal(t, tc.learned, got)
			_, kept := cc.mu.pubs[key]
			require.Equal(t, !tc.forgot, kept, "publisher on the failed broker")
			_, keptOther := cc.mu.learned[other]
			require.Equal(t, !tc.forgot, keptOther, "routes learned to the failed broker")
		})
	}
}

// replicatedPlacement puts shard 0 on replicas b1, b2, b3 (b1 preferred);
// members named in down are not live.
func replicatedPlacement(down ...string) *cluster.Placement {
	p := placementOf([]string{"b1"})
	p.Assignments[0].Replicas = []string{"b1", "b2", "b3"}
	for _, id := range []string{"b2", "b3"} {
		p.Members = append(p.Members, cluster.Member{ID: id, QUICAddr: id + ":5000", Live: !slices.Contains(down, id)})
	}
	return p
}

// A broker that did not serve a shard and named no owner steers the shard
// away: a replicated shard to the next live replica of its set (which
// forwards to the leader); another back to the placement or the
// bootstrap broker, the bootstrap broker itself giving way to the next
// one configured.
func TestClusterClientSteers(t *testing.T) {
	// steps steers shard 0 of cc away from each step's broker in turn and
	// checks where it routes then.
	steps := func(cc *ClusterClient, steps ...[3]string) {
		t.Helper()
		for _, st := range steps {
			cc.mu.Lock()
			cc.steerLocked(shardN(0), st[0])
			got := cc.routeLocked(shardN(0))
			cc.mu.Unlock()
			require.Equal(t, st[1], got, "away from %s: %s", st[0], st[2])
		}
	}
	cc := newRoutingClient("boot:5000")
	cc.SetPlacement(replicatedPlacement("b2"))
	require.Equal(t, "b1:5000", cc.Owner(shardN(0)), "the preferred leader")
	steps(cc,
		[3]string{"b1:5000", "b3:5000", "b2 is not live"},
		[3]string{"b3:5000", "b1:5000", "round the set"},
		[3]string{"elsewhere:5000", "b1:5000", "a broker outside the set changes nothing"})

	cc = newRoutingClient("boot:5000")
	cc.cfg.Bootstrap = []string{"boot:5000", "boot2:5000"}
	cc.mu.learned[shardN(0)] = "b7:5000"
	steps(cc,
		[3]string{"b7:5000", "boot:5000", "what was learned at b7 is forgotten"},
		[3]string{"boot:5000", "boot2:5000", "the next bootstrap broker"},
		[3]string{"boot2:5000", "boot:5000", "round the bootstrap brokers"})
}

// What is sent again, and when: only what the broker refused saying it
// was not applied, or what never left; a redirect to another broker at
// once the first time, everything else after 10 ms doubling to 1 s (or
// the delay the broker asked for), for as many attempts as configured.
func TestRetrierPaces(t *testing.T) {
	notLeader := refusal("not_owner: led by b2", wire.CodeNotLeader, &wire.Owner{ID: "b2", Addr: "b2:5000"})
	noLeader := refusal("owner_unavailable: no leader", wire.CodeShardUnavailable, nil)
	busy := refusal("overloaded", wire.CodeOverloaded, nil)
	busy.Err.RetryAfterMs = 250
	for _, tc := range []struct {
		name  string
		err   error
		sent  bool
		again bool
	}{
		{"not_leader", notLeader, true, true},
		{"shard_unavailable", noLeader, true, true},
		{"draining", refusal("draining", wire.CodeDraining, nil), true, true},
		{"overloaded", busy, true, true},
		{"connection lost with the publish in flight", errors.New("stream reset"), true, false},
		{"forward lost mid-publish", refusal("owner_unavailable (unacknowledged)", wire.CodeUnacknowledged, nil), true, false},
		{"leadership_lost", refusal("leadership_lost", wire.CodeLeadershipLost, nil), true, false},
		{"quorum_timeout", refusal("quorum_timeout", wire.CodeQuorumTimeout, nil), true, false},
		{"forbidden", refusal("forbidden", wire.CodeForbidden, nil), true, false},
		{"a broker without typed errors", &BrokerError{Message: "not_owner"}, true, false},
		{"dial failed: never sent", ErrConnectionRefused, false, true},
		{"the caller's context", context.DeadlineExceeded, false, false},
		{"closed", ErrClosed, false, false},
		{"cursor refused", &CursorError{Reason: "too_old"}, false, false},
	} {
		r := newRetrier(2)
		_, again := r.next(tc.err, tc.sent, "a:1", "b:1")
		require.Equal(t, tc.again, again, tc.name)
	}

	r := newRetrier(12)
	var waits []time.Duration
	for {
		d, again := r.next(notLeader, true, "a:1", "b:1")
		if !again {
			break
		}
		waits = append(waits, d)
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{0, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second, time.Second}, waits,
		"12 attempts: one redirect at once, then backing off")

	r = newRetrier(3)
	d, _ := r.next(notLeader, true, "a:1", "a:1")
	require.Equal(t, 10*ms, d, "named itself: back off")
	d, _ = r.next(busy, true, "a:1", "a:1")
	require.Equal(t, 250*ms, d, "the broker's retry_after_ms")
	_, again := r.next(noLeader, true, "a:1", "a:1")
	require.False(t, again, "three attempts made")
}

// scripted is a ClusterClient whose sends are answered by answer(attempt,
// addr, payloads): an error means the publish was not sent; else the
// returned outcome reaches the publish's hook.
func scripted(t *testing.T, attempts int, answer func(n int, addr string, payloads [][]byte) (Ack, error, error)) (*ClusterClient, *[]string) {
	cc := newRoutingClient("boot:5000")
	cc.cfg.Attempts = attempts
	cc.SetPlacement(replicatedPlacement())
	var mu sync.Mutex
	var tried []string
	cc.send = func(_ context.Context, addr string, _ cluster.Shard, payloads [][]byte, hook func(*PendingAck)) error {
		mu.Lock()
		n := len(tried)
		tried = append(tried, addr)
		mu.Unlock()
		res, answerErr, sendErr := answer(n, addr, payloads)
		if sendErr != nil {
			return sendErr
		}
		pa := &PendingAck{done: make(chan struct{}), res: res}
		pa.hook = hook
		pa.finish(answerErr)
		return nil
	}
	t.Cleanup(func() { cc.Close() })
	return cc, &tried
}

func owned(id string) Ack {
	return Ack{Owner: wire.Owner{ID: id, Addr: id + ":5000"}, Named: true}
}

// A publish refused not_leader goes to the leader named; refused with no
// owner named (an election running), to the next replica; a broker that
// cannot be dialled, to the next one; the ack teaches the route, and the
// caller sees only the ack. The payloads sent again are the client's
// copy, not the caller's buffer.
func TestClusterClientPublishFollowsRefusals(t *testing.T) {
	ctx := context.Background()
	cc, tried := scripted(t, 10, func(n int, addr string, payloads [][]byte) (Ack, error, error) {
		assert.Equal(t, "payload", string(payloads[0]), "attempt %d", n) // not on the test's goroutine
		switch n {
		case 0:
			return owned("b2"), refusal("not_owner: led by b2", wire.CodeNotLeader, &wire.Owner{ID: "b2", Addr: "b2:5000"}), nil
		case 1:
			return Ack{}, refusal("owner_unavailable: no leader", wire.CodeShardUnavailable, nil), nil
		case 2:
			return Ack{}, nil, ErrConnectionRefused
		}
		return owned("b2"), nil, nil
	})
	buf := []byte("payload")
	pa := cc.PublishAsync(ctx, "ns", "s", 0, [][]byte{buf})
	copy(buf, "changed")
	require.NoError(t, pa.Wait(ctx))
	require.Equal(t, []string{"b1:5000", "b2:5000", "b3:5000", "b1:5000"}, *tried)
	own, named := pa.Owner()
	require.True(t, named)
	require.Equal(t, "b2", own.ID)
	require.Equal(t, "b2:5000", cc.Owner(shardN(0)), "the ack taught the leader")
	require.Equal(t, uint64(3), cc.Resends())
}

// A publish whose connection failed in flight, or that the broker
// answered with an outcome unknown, is not sent again; one refused on
// every attempt fails with the last refusal; the caller's context ending
// stops the retries, with both errors.
func TestClusterClientPublishGivesUp(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		err   error
		tries int
	}{
		{"connection lost in flight", errors.New("stream reset"), 1},
		{"leadership_lost", refusal("leadership_lost", wire.CodeLeadershipLost, nil), 1},
		{"refused every time", refusal("owner_unavailable: no leader", wire.CodeShardUnavailable, nil), 3},
	} {
		cc, tried := scripted(t, 3, func(int, string, [][]byte) (Ack, error, error) { return Ack{}, tc.err, nil })
		err := cc.Publish(ctx, "ns", "s", 0, [][]byte{[]byte("x")})
		require.ErrorIs(t, err, tc.err, tc.name)
		require.Len(t, *tried, tc.tries, tc.name)
	}

	cctx, cancel := context.WithCancel(ctx)
	noLeader := refusal("owner_unavailable: no leader", wire.CodeShardUnavailable, nil)
	cc, tried := scripted(t, 10, func(n int, _ string, _ [][]byte) (Ack, error, error) {
		if n == 1 {
			cancel()
		}
		return Ack{}, noLeader, nil
	})
	err := cc.PublishAsync(cctx, "ns", "s", 0, [][]byte{[]byte("x")}).Wait(ctx)
	require.ErrorIs(t, err, ErrOwnerUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, *tried, 2)
}

// Forgetting a broker drops only what concerns it.
func TestClusterClientForgetsOneBroker(t *testing.T) {
	cc := newRoutingClient("boot:5000")
	cc.mu.pubs[clusterPubKey{"b1:5000", "ns", "s"}] = &Publisher{}
	cc.mu.pubs[clusterPubKey{"b2:5000", "ns", "s"}] = &Publisher{}
	cc.mu.learned[shardN(0)] = "b1:5000"
	cc.mu.learned[shardN(1)] = "b2:5000"
	cc.forgetLocked("b1:5000")
	require.Equal(t, map[cluster.Shard]string{shardN(1): "b2:5000"}, cc.mu.learned)
	require.Len(t, cc.mu.pubs, 1)
	_, ok := cc.mu.pubs[clusterPubKey{"b2:5000", "ns", "s"}]
	require.True(t, ok)
}

// A closed ClusterClient dials nothing, and one without a bootstrap broker
// or with a negative Attempts is a configuration error.
func TestClusterClientRefusals(t *testing.T) {
	cc := newRoutingClient("boot:5000")
	require.NoError(t, cc.Close())
	_, err := cc.clientLocked(context.Background(), "b1:5000")
	require.ErrorIs(t, err, ErrClosed)
	_, err = DialCluster(context.Background(), ClusterConfig{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = DialCluster(context.Background(), ClusterConfig{Bootstrap: []string{"b1:5000"}, Attempts: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Equal(t, shardN(3), cc.shard("ns", "s", 3), "shards are named in the client's tenant")
}
