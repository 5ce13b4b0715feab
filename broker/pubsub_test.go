package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
)

// docs/design.md, "Semantics", publish + subscribe: acked publishes reach a subscriber in
// order with contiguous offsets.
func TestPublishReachesSubscriberInOrderWithOffsets(t *testing.T) {
	h := startBroker(t, broker.Config{})
	c := h.dial(t)
	ctx := ctxT(t, 10*time.Second)
	sub, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.True(t, pub.Binary(), "the broker advertises binary publish; the client must use it")
	for i := range 3 {
		require.NoError(t, pub.Publish(ctx, []byte(fmt.Sprintf("m%d", i))))
	}
	require.NoError(t, pub.PublishBatch(ctx, [][]byte{[]byte("b0"), []byte("b1")}))
	for i, want := range []string{"m0", "m1", "m2", "b0", "b1"} {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.True(t, ev.HasOffset)
		require.Equal(t, uint64(i), ev.Offset)
		require.Equal(t, want, string(ev.Payload))
	}
}

// In the latency profile a live event goes out from the publishing
// goroutine while the subscriber's writer waits with nothing queued, and
// through the queue otherwise: one publish at a time (written directly),
// then a pipelined burst (mostly queued), then one at a time again, reach
// every subscriber complete, in order, once.
func TestLatencyProfileDeliversInOrderWrittenDirectlyOrQueued(t *testing.T) {
	h := startBroker(t, broker.Config{Batch: fanout.BatchConfig{MaxEvents: 1, MaxDelay: fanout.NoDelay}})
	ctx := ctxT(t, 20*time.Second)
	var subs []*client.Subscription
	for range 3 {
		sub, err := h.dial(t).Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	n := 0
	one := func() {
		require.NoError(t, pub.Publish(ctx, []byte(fmt.Sprint(n))))
		n++
	}
	for range 50 {
		one()
	}
	var burst []*client.PendingAck
	for range 500 {
		burst = append(burst, pub.PublishAsync([][]byte{[]byte(fmt.Sprint(n))}))
		n++
	}
	for _, pa := range burst {
		require.NoError(t, pa.Wait(ctx))
	}
	for range 50 {
		one()
	}
	for _, sub := range subs {
		for i := range n {
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(i), ev.Offset)
			require.Equal(t, fmt.Sprint(i), string(ev.Payload))
		}
	}
}

func TestUnknownStreamIsAnErrorNotAHang(t *testing.T) {
	h := startBroker(t, broker.Config{})
	c := h.dial(t)
	ctx := ctxT(t, 10*time.Second)
	pub, err := c.NewPublisher(ctx, "default", "nope")
	require.NoError(t, err)
	err = pub.Publish(ctx, []byte("x"))
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Contains(t, be.Message, "stream not found: tenant=t1 namespace=default stream=nope")
	_, err = c.Subscribe(ctx, "default", "nope", client.SubscribeOptions{})
	require.ErrorAs(t, err, &be)
}

// Subscribing in the past replays from the ring and joins the live tail
// with no gap and no duplicate.
func TestSubscribeFromEarliestReplaysThenFollows(t *testing.T) {
	h := startBroker(t, broker.Config{RingEvents: 100})
	c := h.dial(t)
	ctx := ctxT(t, 10*time.Second)
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, pub.PublishBatch(ctx, payloads(0, 10)))
	sub, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{From: client.Offset(4)})
	require.NoError(t, err)
	require.NoError(t, pub.PublishBatch(ctx, payloads(10, 15)))
	for want := uint64(4); want < 15; want++ {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, ev.Offset)
		require.Equal(t, want, seqOf(ev.Payload))
	}
	_, err = c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{From: client.Offset(99)})
	var ce *client.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "in_future", ce.Reason)
	require.Equal(t, uint64(15), ce.Available)
}

func payloads(from, to int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, seq(uint64(i), 16))
	}
	return out
}

func seq(n uint64, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.BigEndian.PutUint64(b, n)
	return b[:max(size, 8)]
}

func seqOf(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// Lossless fanout at volume: 1 publisher × 10 subscribers, 100,000 acked 256 B
// messages: every subscriber receives all, in order, with contiguous
// offsets. The queues use the lossless Block policy.
func TestFanout10Subscribers100kAcked(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	h := startBroker(t, broker.Config{Queue: fanout.Config{Capacity: 4096, Policy: fanout.Block}})
	ctx := ctxT(t, 120*time.Second)
	subs := make([]*client.Subscription, 10)
	for i := range subs {
		var err error
		subs[i], err = h.dial(t).Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(subs))
	for _, s := range subs {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- expectSequence(ctx, s, 0, uint64(n)) }()
	}
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	publishPipelined(t, ctx, pub, n, 256, 256)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// publishPipelined sends n acked single-message publishes with at most
// window in flight and checks every ack.
func publishPipelined(t testing.TB, ctx context.Context, pub *client.Publisher, n, size, window int) {
	t.Helper()
	inflight := make(chan *client.PendingAck, window)
	done := make(chan error, 1)
	go func() {
		for pa := range inflight {
			if err := pa.Wait(ctx); err != nil {
				done <- err
				for range inflight {
				}
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		inflight <- pub.PublishAsync([][]byte{seq(uint64(i), size)})
	}
	close(inflight)
	require.NoError(t, <-done)
}

// expectSequence reads events first..last-1 in order with matching offsets.
func expectSequence(ctx context.Context, s *client.Subscription, first, last uint64) error {
	for want := first; want < last; want++ {
		ev, err := s.Next(ctx)
		if err != nil {
			return fmt.Errorf("subscription %d at %d: %w", s.ID(), want, err)
		}
		if ev.Dropped != 0 {
			return fmt.Errorf("subscription %d: %d events dropped before %d", s.ID(), ev.Dropped, want)
		}
		if !ev.HasOffset || ev.Offset != want || seqOf(ev.Payload) != want {
			return fmt.Errorf("subscription %d: got offset %d payload %d, want %d", s.ID(), ev.Offset, seqOf(ev.Payload), want)
		}
	}
	return nil
}

// A subscription the client closes on a stream nothing is published to
// ends at once: its slot under MaxSubscriptionsPerConn, its queue and its
// writer are released although the writer has nothing to write (it used to
// learn of the STOP_SENDING only at its next write, or when the
// connection closed).
func TestClosedIdleSubscriptionIsReleased(t *testing.T) {
	h := startBroker(t, broker.Config{MaxSubscriptionsPerConn: 2})
	c := h.dial(t)
	ctx := ctxT(t, 10*time.Second)
	for range 5 {
		a, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
		require.NoError(t, err)
		b, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
		require.NoError(t, err)
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		require.Eventually(t, func() bool { return subscriptionsOf(h.b) == 0 }, 5*time.Second, time.Millisecond,
			"closed subscriptions still registered with the broker")
	}
}

func subscriptionsOf(b *broker.Broker) int {
	n := 0
	for _, cs := range b.Stats().Connections {
		n += len(cs.Subscriptions)
	}
	return n
}
