package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/devtls"
)

func TestSubUnknownStreamFails(t *testing.T) {
	tb := startBroker(t)
	r := runSubT(t, tb.args("--stream", "nope", "--count", "1")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "felix sub: broker: stream not found: tenant=t1 namespace=default stream=nope")
}

func TestSubCursorInFutureFails(t *testing.T) {
	tb := startBroker(t)
	r := runSubT(t, tb.args("--from", "99", "--count", "1")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "subscribe cursor in_future: requested 99, available 0")
}

// Without --count, sub runs until its context ends (SIGINT/SIGTERM in
// runSub) and that is a clean exit.
func TestSubUntilInterruptedExitsZero(t *testing.T) {
	tb := startBroker(t)
	requireSummary(t, runPubT(t, "", tb.args("--ack", "hi")...), "1", "2")
	ctx, cancel := context.WithCancel(ctxT(t))
	var out, errOut bytes.Buffer
	code := sub(ctx, tb.args("--from", "earliest"), cancelOnWrite{&out, cancel}, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	require.Equal(t, "0 0 hi\n", out.String())
}

func TestSubUsage(t *testing.T) {
	for _, args := range [][]string{
		{"sub", "extra"},
		{"sub", "--from", "yesterday"},
		{"sub", "--count", "-1"},
		{"sub", "--shard", "4294967296"},
	} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "(felix sub --help prints the usage)", args)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"hello":       "hello",
		"héllo wörld": "héllo wörld",
		"":            "",
		"a\nb":        "0x610a62",
		"tab\t":       "0x74616209",
		"\xff\xfe":    "0xfffe",
		"\x00":        "0x00",
	} {
		require.Equal(t, want, printable([]byte(in)), "%q", in)
	}
}

// A subscriber that falls behind on an ephemeral stream counts the events
// the broker reports lost toward --count, so it ends instead of waiting
// for events that will never come, says how many were lost, and exits 3.
func TestSubCountsLostEventsAndExitsThree(t *testing.T) {
	tb := startBrokerWith(t, broker.Config{Queue: fanout.Config{Capacity: 4}}, broker.StreamSpec{
		StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "demo"}, Shards: 1,
	})
	ctx := ctxT(t)
	c := dialTest(t, tb, client.Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 64 << 10, SubscriptionBuffer: 1})
	s, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	// The subscriber's first write waits until everything is published,
	// so its queue overflows meanwhile.
	published := make(chan struct{})
	out := &gatedWriter{gate: published}
	var errOut bytes.Buffer
	code := make(chan int, 1)
	go func() { code <- follow(ctx, []*shardSub{{shard: 0, c: c, s: s}}, 2000, false, out, &errOut) }()
	requireSummary(t, runPubT(t, "", tb.args("--count", "2000", "--size", "1024")...), "2000", "2048000")
	close(published)
	require.Equal(t, exitLost, <-code, errOut.String())
	lines := strings.Count(out.String(), "\n")
	require.Contains(t, errOut.String(), "GAP shard=0 dropped=")
	require.Contains(t, errOut.String(), fmt.Sprintf("event(s) lost (reported by the broker), %d received", lines))
	require.Less(t, lines, 2000)
}

// gatedWriter blocks its first Write until gate is closed.
type gatedWriter struct {
	gate <-chan struct{}
	buf  bytes.Buffer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	<-w.gate
	return w.buf.Write(p)
}

func (w *gatedWriter) String() string { return w.buf.String() }

// In a cluster, felix sub at a broker that does not own the shard follows
// the not_owner answer to the owner named in it, and prints the owner's
// events.
func TestSubFollowsNotOwnerToTheOwner(t *testing.T) {
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	demo := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "demo"}, Shards: 2}
	var nodes []*brokertest.Broker
	var ms []cluster.Member
	for _, id := range []string{"b1", "b2"} {
		n := brokertest.Start(t, broker.Config{NodeID: id, NodeToken: "node-secret"}, brokertest.Options{Streams: []broker.StreamSpec{demo}, Cert: cert})
		nodes = append(nodes, n)
		ms = append(ms, cluster.Member{ID: id, QUICAddr: n.Addr, Live: true})
	}
	p := &cluster.Placement{Version: 3, Members: ms}
	for i, owner := range []string{"b1", "b2"} {
		p.Assignments = append(p.Assignments, cluster.Assignment{Owner: owner,
			Shard: cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "demo", Shard: i}})
	}
	for _, n := range nodes {
		n.Broker.SetPlacement(p)
	}

	owner := &testBroker{bt: nodes[1], b: nodes[1].Broker, addr: nodes[1].Addr}
	c := dialTest(t, owner, client.Config{})
	pub, err := c.NewPublisher(ctxT(t), "default", "demo")
	require.NoError(t, err)
	require.NoError(t, pub.PublishShardAsync(1, [][]byte{[]byte("to-b2")}).Wait(ctxT(t)))

	r := runSubT(t, "--addr", nodes[0].Addr, "--ca", nodes[0].CAFile, "--shard", "1", "--from", "earliest", "--count", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "shard 1 is owned by b2 ("+nodes[1].Addr+"); subscribing there")
	require.Equal(t, fmt.Sprintf("1 %d to-b2\n", 3<<32), r.stdout, "the first offset of placement version 3's epoch")
}
