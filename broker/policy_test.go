package broker_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
)

// stalled subscribes to demo with tiny windows and never reads, so its
// backlog sits in the broker's queue.
func stalled(t *testing.T, h *harness) *client.Subscription { return stalledOn(t, h, "demo") }

// Under Block an acked publish that cannot be admitted in time gets an error
// ack, never a hang, and a refused publish leaves no trace (no offset).
func TestBlockPolicyRefusesAckedPublishAfterAdmitTimeout(t *testing.T) {
	h := startBroker(t, broker.Config{Queue: fanout.Config{Capacity: 8, Policy: fanout.Block}, AdmitTimeout: 100 * time.Millisecond})
	stalled(t, h)
	ctx := ctxT(t, 20*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	var refused error
	for i := 0; refused == nil && i < 10_000; i++ {
		refused = pub.Publish(ctx, make([]byte, 1024))
	}
	var be *client.BrokerError
	require.ErrorAs(t, refused, &be)
	require.Contains(t, be.Message, "ingress overloaded")
}

// With FELIX_INGRESS_POLICY=drop a fire-and-forget publish that cannot be
// admitted is dropped explicitly: counted in /metrics and reported on the
// stream, never silently.
func TestIngressDropIsCountedAndReported(t *testing.T) {
	h := startBroker(t, broker.Config{Queue: fanout.Config{Capacity: 8, Policy: fanout.Block}, IngressDrop: true})
	stalled(t, h)
	ctx := ctxT(t, 20*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	for i := 0; i < 2000 && pub.Err() == nil; i++ {
		require.NoError(t, pub.Send([][]byte{make([]byte, 1024)}))
	}
	require.NoError(t, pub.Close(ctx))
	require.ErrorContains(t, pub.Err(), "ingress overloaded")
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NotContains(t, string(body), `felix_dropped_events_total{reason="ingress"} 0`)
	require.True(t, strings.Contains(string(body), `felix_dropped_events_total{reason="ingress"}`))
}

// drop_old really evicts the oldest: after a stall the subscriber sees the
// newest events, and the evicted ones are reported as a gap.
func TestDropOldKeepsNewestAndReportsGap(t *testing.T) {
	h := startBroker(t, broker.Config{Queue: fanout.Config{Capacity: 16, Policy: fanout.DropOld}})
	ctx := ctxT(t, 20*time.Second)
	c := h.dialWith(t, client.Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 64 << 10, SubscriptionBuffer: 1})
	sub, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	const n = 2000
	for i := range n {
		require.NoError(t, pub.Publish(ctx, seq(uint64(i), 1024)))
	}
	var delivered, dropped uint64
	var last uint64
	for delivered+dropped < n {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		if ev.Dropped > 0 {
			dropped += ev.Dropped
			continue
		}
		delivered++
		last = ev.Offset
	}
	require.Equal(t, uint64(n-1), last, "the newest event is delivered")
	require.NotZero(t, dropped)
	require.Equal(t, uint64(n), delivered+dropped)
}
