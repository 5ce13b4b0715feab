package broker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// publishJobs fills a durable stream with n records whose payload encodes
// their index (seq).
func publishJobs(t *testing.T, ctx context.Context, h *harness, stream string, n int) {
	t.Helper()
	pub, err := h.dial(t).NewPublisher(ctx, "default", stream)
	require.NoError(t, err)
	publishPipelined(t, ctx, pub, n, 32, 64)
}

// docs/design.md, "Semantics", queue: in the happy path every record is delivered to
// exactly one of three members, once, and acked once.
func TestGroupEveryRecordOnceAcrossThreeMembers(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 60*time.Second)
	const n = 600
	var (
		mu        sync.Mutex
		seen      = map[uint64]int{}
		perMember [3]int
		wg        sync.WaitGroup
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for m := range 3 {
		q, err := h.dial(t).Consume(ctx, "default", "jobs", "workers", client.QueueOptions{Member: string(rune('a' + m)), MaxInflight: 16})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msg, err := q.Next(cctx)
				if err != nil {
					return
				}
				if msg.Redeliveries != 0 || seqOf(msg.Payload) != msg.Offset {
					t.Errorf("offset %d: redeliveries %d, payload %d", msg.Offset, msg.Redeliveries, seqOf(msg.Payload))
				}
				if err := q.Ack(cctx, msg.Ref()); err != nil {
					if cctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				seen[msg.Offset]++
				perMember[m]++
				if len(seen) == n {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	// The members wait before the records exist, so all three share them.
	publishJobs(t, ctx, h, "jobs", n)
	wg.Wait()
	require.Len(t, seen, n)
	for m, k := range perMember {
		require.NotZero(t, k, "member %d got nothing", m)
	}
	for off, k := range seen {
		require.Equal(t, 1, k, "offset %d delivered %d times", off, k)
	}
	groups := h.b.Stats().Groups
	require.Len(t, groups, 1)
	require.Equal(t, broker.GroupStats{Stream: "t1/default/jobs", Group: "workers", Committed: n, Next: n, Tail: n}, groups[0])
}

// docs/design.md, "Semantics", queue: a consumer killed mid-batch (its client closed
// without acking) has its unacked records redelivered to another member
// with a redelivery count; acked records survive a broker restart and are
// not delivered again; nothing is lost.
func TestGroupKilledConsumerRedeliveredAndNothingLostAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, durableSpec("jobs", "on_commit"))
	ctx := ctxT(t, 60*time.Second)
	const n = 200
	publishJobs(t, ctx, h, "jobs", n)

	victim := h.dial(t)
	qa, err := victim.Consume(ctx, "default", "jobs", "g", client.QueueOptions{Member: "victim", MaxInflight: 10})
	require.NoError(t, err)
	taken := map[uint64]bool{}
	for range 10 {
		msg, err := qa.Next(ctx)
		require.NoError(t, err)
		taken[msg.Offset] = true
	}
	require.NoError(t, victim.Close()) // killed mid-batch: nothing acked
	// The broker hands the victim's records back when it sees the
	// connection go; wait for that so the survivor's first takes are them.
	require.Eventually(t, func() bool { return h.b.Stats().Groups[0].Inflight == 0 }, 10*time.Second, time.Millisecond)

	qb, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{Member: "survivor", MaxInflight: 10})
	require.NoError(t, err)
	acked := map[uint64]bool{}
	for len(acked) < 100 {
		msg, err := qb.Next(ctx)
		require.NoError(t, err)
		if taken[msg.Offset] {
			require.GreaterOrEqual(t, msg.Redeliveries, uint64(1), "offset %d was out to the victim", msg.Offset)
			delete(taken, msg.Offset)
		}
		require.NoError(t, qb.Ack(ctx, msg.Ref()))
		acked[msg.Offset] = true
	}
	require.Empty(t, taken, "every record the victim held was redelivered")
	require.NoError(t, h.b.Close()) // the survivor holds up to 10 unacked records

	h2 := serveBroker(t, broker.Config{DataDir: dir})
	qc, err := h2.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{Member: "after", MaxInflight: 32})
	require.NoError(t, err)
	for len(acked) < n {
		msg, err := qc.Next(ctx)
		require.NoError(t, err)
		require.False(t, acked[msg.Offset], "offset %d was acked before the restart", msg.Offset)
		require.NoError(t, qc.Ack(ctx, msg.Ref()))
		acked[msg.Offset] = true
	}
	require.Len(t, acked, n)
}

// docs/design.md, "Semantics", queue: an unacked record comes back after the visibility
// timeout with its redelivery count, and a nack brings it back at once.
func TestGroupVisibilityTimeoutAndNack(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 20*time.Second)
	publishJobs(t, ctx, h, "jobs", 2)
	start := time.Now() // before the broker can take the record
	q, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 1, VisibilityTimeout: 150 * time.Millisecond})
	require.NoError(t, err)
	first, err := q.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, client.QueueMessage{Offset: 0, Payload: seq(0, 32)}, first)
	again, err := q.Next(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	require.Equal(t, uint64(0), again.Offset, "max_inflight 1: the timed-out record, not the next")
	require.Equal(t, uint64(1), again.Redeliveries)

	require.NoError(t, q.Ack(ctx, first.Ref()))
	next, err := q.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), next.Offset)

	// A nack redelivers at once: with a one-minute timeout, only the nack
	// can bring the record back within the test's budget.
	qn, err := h.dial(t).Consume(ctx, "default", "jobs", "n", client.QueueOptions{MaxInflight: 1, VisibilityTimeout: time.Minute})
	require.NoError(t, err)
	msg, err := qn.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, qn.Nack(ctx, msg.Ref()))
	back, err := qn.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, client.QueueMessage{Offset: msg.Offset, Payload: msg.Payload, Redeliveries: 1}, back)
}

// Bad queue requests get precise errors and the connection survives.
func TestGroupBadInputKeepsConnection(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, demo, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 20*time.Second)
	c := h.dial(t)
	var be *client.BrokerError
	_, err := c.Consume(ctx, "default", "demo", "g", client.QueueOptions{})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: queue: stream t1/default/demo is not durable (queues read the stream's log)", be.Message)
	_, err = c.Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 1 << 17})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: max_inflight 131072 not in [1, 65536]", be.Message)
	_, err = c.Consume(ctx, "default", "nope", "g", client.QueueOptions{})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "stream not found: tenant=t1 namespace=default stream=nope", be.Message)
	_, err = c.Consume(ctx, "default", "jobs", "", client.QueueOptions{})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: group must be 1..255 bytes of UTF-8", be.Message)

	publishJobs(t, ctx, h, "jobs", 1)
	q, err := c.Consume(ctx, "default", "jobs", "g", client.QueueOptions{})
	require.NoError(t, err)
	err = q.Ack(ctx, client.QueueRef{Offset: 999})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: queue: offset 999 was never delivered to group g", be.Message)
	msg, err := q.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Ack(ctx, msg.Ref()))
	err = q.Nack(ctx, msg.Ref())
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: queue: offset 0 is already acked by group g", be.Message)
	require.NoError(t, q.Ack(ctx, msg.Ref()), "acking twice is harmless")
	require.NoError(t, q.AckAsync(client.QueueRef{Offset: 12345}))
	require.Eventually(t, func() bool { return q.LastError() != nil }, 5*time.Second, 5*time.Millisecond)
	require.True(t, errors.As(q.LastError(), &be))
}

// Records delivered but not acked before a clean broker restart come back
// after it with a redelivery count, even when no ack wrote the state since.
func TestGroupRestartCountsEarlierDeliveries(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 30*time.Second)
	publishJobs(t, ctx, h, "jobs", 8)
	q, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 5})
	require.NoError(t, err)
	for want := range uint64(5) {
		msg, err := q.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, msg.Offset)
	}
	require.NoError(t, h.b.Close())

	h2 := serveBroker(t, broker.Config{DataDir: dir})
	q2, err := h2.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{})
	require.NoError(t, err)
	for want := range uint64(8) {
		msg, err := q2.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, msg.Offset)
		require.Equal(t, map[bool]uint64{true: 1, false: 0}[want < 5], msg.Redeliveries, "offset %d", want)
	}
}

// Groups are independent: each group of a stream gets every record.
func TestGroupsAreIndependent(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 20*time.Second)
	publishJobs(t, ctx, h, "jobs", 20)
	c := h.dial(t)
	for _, group := range []string{"billing", "audit"} {
		q, err := c.Consume(ctx, "default", "jobs", group, client.QueueOptions{})
		require.NoError(t, err)
		for want := range uint64(20) {
			msg, err := q.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, want, msg.Offset, group)
			require.NoError(t, q.AckAsync(msg.Ref()))
		}
		require.NoError(t, q.Ack(ctx, client.QueueRef{Offset: 19}))
		require.NoError(t, q.Close())
	}
}
