package broker_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

func durableSpec(name, fsync string) broker.StreamSpec {
	return broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: name}, Shards: 1, Durable: true, Fsync: fsync}
}

// docs/design.md, "Semantics", durability: acked on_commit records survive a restart; the
// restarted broker reopens the stream from its data directory's catalog and
// a subscriber from earliest replays them in order.
func TestDurableStreamSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, durableSpec("orders", "on_commit"))
	ctx := ctxT(t, 30*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	publishPipelined(t, ctx, pub, 1000, 128, 64)
	require.NoError(t, h.b.Close())

	h2 := serveBroker(t, broker.Config{DataDir: dir})
	require.Len(t, h2.b.Streams(), 1, "the catalog reopens the durable stream")
	shs := h2.b.Stats().Streams[0].Shards[0]
	require.Equal(t, [2]uint64{0, 1000}, [2]uint64{shs.FirstOffset, shs.NextOffset}, "stats give the log's bounds, not the empty ring's")
	sub, err := h2.dial(t).Subscribe(ctx, "default", "orders", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	require.NoError(t, expectSequence(ctx, sub, 0, 1000))
	pub2, err := h2.dial(t).NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	require.NoError(t, pub2.Publish(ctx, seq(1000, 128)))
	require.NoError(t, expectSequence(ctx, sub, 1000, 1001), "offsets continue after recovery")
}

// Replay reads the log below the ring, then the ring, then joins the live
// tail with no gap and no duplicate, in every fsync mode.
func TestDurableReplayFromLogJoinsLiveTail(t *testing.T) {
	for _, mode := range []string{"on_commit", "periodic", "never"} {
		t.Run(mode, func(t *testing.T) {
			h := serveBroker(t, broker.Config{DataDir: t.TempDir(), RingEvents: 16}, durableSpec("s", mode))
			ctx := ctxT(t, 30*time.Second)
			pub, err := h.dial(t).NewPublisher(ctx, "default", "s")
			require.NoError(t, err)
			publishPipelined(t, ctx, pub, 500, 64, 32)
			sub, err := h.dial(t).Subscribe(ctx, "default", "s", client.SubscribeOptions{From: client.Offset(100)})
			require.NoError(t, err)
			go func() {
				for i := 500; i < 600; i++ {
					pub.PublishAsync([][]byte{seq(uint64(i), 64)})
				}
			}()
			require.NoError(t, expectSequence(ctx, sub, 100, 600))
			_, err = h.dial(t).Subscribe(ctx, "default", "s", client.SubscribeOptions{From: client.Offset(10_000)})
			var ce *client.CursorError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "in_future", ce.Reason)
		})
	}
}

// A replay larger than the QUIC windows flows through flow control.
func TestDurableReplayLargerThanWindows(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir(), RingEvents: 64}, durableSpec("big", "periodic"))
	ctx := ctxT(t, 60*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "big")
	require.NoError(t, err)
	const n = 3000 // 12 MiB of 4 KiB records against 1 MiB windows
	publish4KiB(t, ctx, pub, n)
	c := h.dialWith(t, client.Config{StreamReceiveWindow: 1 << 20, ConnectionReceiveWindow: 1 << 20})
	sub, err := c.Subscribe(ctx, "default", "big", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	require.NoError(t, expectSequence(ctx, sub, 0, n))
}

// publish4KiB publishes records 0..n-1 of 4 KiB (seq payloads) in acked
// batches of 50.
func publish4KiB(t *testing.T, ctx context.Context, pub *client.Publisher, n int) {
	t.Helper()
	for i := 0; i < n; i += 50 {
		batch := make([][]byte, 50)
		for j := range batch {
			batch[j] = seq(uint64(i+j), 4096)
		}
		require.NoError(t, pub.PublishBatch(ctx, batch))
	}
}

// The `subscribed` reply is on the control stream before any replay on the
// event stream: the client parks an event stream until the reply names it,
// so a replay written first could take all of a small connection window
// and leave none for the reply (both sides then waited for the other; the
// second subscribe of this test hung every time before the fix).
func TestSubscribedIsNotOvertakenByReplay(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir(), RingEvents: 64}, durableSpec("big", "periodic"))
	ctx := ctxT(t, 60*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "big")
	require.NoError(t, err)
	const n = 1000 // 4 MiB of 4 KiB records against 64 KiB windows
	publish4KiB(t, ctx, pub, n)
	c := h.dialWith(t, client.Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 64 << 10})
	for round := range 10 {
		rctx := ctxT(t, 5*time.Second)
		sub, err := c.Subscribe(rctx, "default", "big", client.SubscribeOptions{From: client.Earliest()})
		require.NoError(t, err, "subscribe %d", round)
		require.NoError(t, expectSequence(rctx, sub, 0, n), "replay %d", round)
		require.NoError(t, sub.Close())
	}
}

func TestDurableStreamNeedsDataDir(t *testing.T) {
	h := startBroker(t, broker.Config{})
	err := h.b.CreateStream(durableSpec("x", "on_commit"))
	require.ErrorIs(t, err, broker.ErrNoDataDir)
	err = h.b.CreateStream(broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "d", Stream: "y"}, Shards: 1, Fsync: "on_commit"})
	require.ErrorIs(t, err, broker.ErrInvalidStream)
	err = h.b.CreateStream(durableSpec("z", "sometimes"))
	require.ErrorIs(t, err, broker.ErrInvalidStream)
}

// Commit and storage stats reach /metrics: syncs, waiters per sync, latency.
func TestDurableMetricsExported(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("m", "on_commit"))
	ctx := ctxT(t, 20*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "m")
	require.NoError(t, err)
	publishPipelined(t, ctx, pub, 200, 64, 32)
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()
	code, body := do(t, srv, "GET", "/metrics", "")
	require.Equal(t, 200, code)
	for _, m := range []string{"felix_storage_records_total 200", "felix_commit_syncs_total", "felix_commit_waiters_per_sync_bucket",
		"felix_commit_sync_latency_seconds_count", "felix_storage_failed_logs 0"} {
		require.Contains(t, body, m)
	}
	require.NotContains(t, body, "felix_commit_syncs_total 0\n")
}
