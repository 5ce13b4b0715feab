package broker_test

import (
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
)

// Durable streams never drop for a subscriber: one that stops reading
// outgrows its (here tiny) queue, leaves the live path and, once it reads
// again, gets what it missed from the log and rejoins the live tail, every
// record once and in order. The publisher and a subscriber that keeps up
// see nothing of it.
func TestDurableSubscriberThatFallsBehindCatchesUpFromTheLog(t *testing.T) {
	for _, mode := range []string{"on_commit", "periodic"} {
		t.Run(mode, func(t *testing.T) {
			h := serveBroker(t, broker.Config{DataDir: t.TempDir(), Queue: fanout.Config{Capacity: 16}}, durableSpec("s", mode))
			ctx := ctxT(t, 60*time.Second)
			lagging := stalledOn(t, h, "s")
			healthy, err := h.dial(t).Subscribe(ctx, "default", "s", client.SubscribeOptions{})
			require.NoError(t, err)
			kept := make(chan error, 1)
			go func() { kept <- expectSequence(ctx, healthy, 0, 3000) }()

			pub, err := h.dial(t).NewPublisher(ctx, "default", "s")
			require.NoError(t, err)
			publishPipelined(t, ctx, pub, 2000, 256, 64)
			require.Positive(t, metricValue(t, h, "felix_subscriber_catch_ups_total")+
				metricValue(t, h, "felix_subscriber_queue_bytes"), "the stalled subscriber has a backlog")
			// It reads again while more is published: the log, then the
			// live tail, with no gap and no duplicate.
			more := make(chan struct{})
			go func() {
				defer close(more)
				for i := 2000; i < 3000; i++ {
					pub.PublishAsync([][]byte{seq(uint64(i), 256)})
				}
			}()
			require.NoError(t, expectSequence(ctx, lagging, 0, 3000))
			require.NoError(t, <-kept)
			<-more
			require.Positive(t, metricValue(t, h, "felix_subscriber_catch_ups_total"))
			require.Zero(t, metricValue(t, h, `felix_dropped_events_total{reason="subscriber_queue_full"}`))
		})
	}
}

// A Block subscriber that holds publishers up longer than
// SlowConsumerTimeout is cut with ErrSlowConsumer, and the publisher goes
// on: one subscriber that stopped reading cannot stall a stream for good.
func TestBlockSubscriberThatHoldsPublishersUpIsCut(t *testing.T) {
	h := startBroker(t, broker.Config{Queue: fanout.Config{Capacity: 8, Policy: fanout.Block},
		SlowConsumerTimeout: 300 * time.Millisecond})
	stuck := stalledOn(t, h, "demo")
	ctx := ctxT(t, 30*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	for i := range 5000 {
		require.NoError(t, pub.Send([][]byte{seq(uint64(i), 1024)}))
	}
	require.NoError(t, pub.Close(ctx), "the publisher finished once the stuck subscriber was cut")
	require.EqualValues(t, 1, metricValue(t, h, "felix_slow_consumers_total"))
	for {
		_, err := stuck.Next(ctx)
		if err != nil {
			require.ErrorIs(t, err, client.ErrSlowConsumer)
			break
		}
	}
}

// stalledOn subscribes to stream from the earliest offset with tiny
// windows and a one-frame client buffer, and reads nothing until the test
// calls Next: its backlog piles up in the broker.
func stalledOn(t *testing.T, h *harness, stream string) *client.Subscription {
	t.Helper()
	c := h.dialWith(t, client.Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 64 << 10, SubscriptionBuffer: 1})
	sub, err := c.Subscribe(ctxT(t, 10*time.Second), "default", stream, client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	return sub
}

// metricValue is the value of one series in the broker's /metrics (0 when
// absent).
func metricValue(t *testing.T, h *harness, series string) float64 {
	t.Helper()
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}
