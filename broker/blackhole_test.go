package broker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/impair"
	"github.com/felixmq/felix/udp"

	"github.com/felixmq/felix/internal/testutil"
)

// TestMTUBlackHoleRedial proves the stall path of docs/design.md,
// "Transport": the
// path's MTU drops below the connection's packet size mid-stream (a relay
// starts dropping datagrams over 1200 bytes), quic-go keeps losing its
// full-size packets and probes, the client's watchdog sees the probe
// timeouts, closes the connection and redials at 1200 with discovery off;
// the publisher that was on it fails with ErrPathStalled and a new one
// works through the same relay. The relay listens on loopback, where the
// MTU is guaranteed and the watchdog never redials, so the client sets its
// packet size explicitly, as it would for a real network path.
func TestMTUBlackHoleRedial(t *testing.T) {
	h := startBroker(t, broker.Config{})
	proxy, err := impair.New(h.addr)
	require.NoError(t, err)
	defer proxy.Close()

	logs := &testutil.LockedBuffer{}
	cfg := client.Config{Tenant: "t1", TLS: h.clientTLS, BlackHoleCooldown: time.Minute,
		InitialMTU: udp.MaxPacketSize, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, proxy.Addr(), cfg)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, udp.MaxPacketSize, int(udp.ConnStatsFrom(c.Conn().Context()).Snapshot().MTU),
		"a loopback peer starts at the largest size")

	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	payload := make([]byte, 4096)
	require.NoError(t, pub.Publish(ctx, payload))

	proxy.SetMaxDatagram(udp.BlackHolePacketSize)
	stalled := time.Now()
	err = pub.Publish(ctx, payload)
	require.ErrorIs(t, err, client.ErrPathStalled)
	require.Eventually(t, func() bool { return c.Redials() >= 1 }, 10*time.Second, 10*time.Millisecond)
	recovered := time.Since(stalled)

	// The broker learns of the stall from the old connection's close; if the
	// redial overtook it, that connection stalls too and the client redials
	// once more, so allow a second round.
	var pub2 *client.Publisher
	require.Eventually(t, func() bool {
		if pub2, err = c.NewPublisher(ctx, "default", "demo"); err != nil {
			require.ErrorIs(t, err, client.ErrPathStalled)
			return false
		}
		if err = pub2.Publish(ctx, payload); err != nil {
			require.ErrorIs(t, err, client.ErrPathStalled)
			return false
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	for range 10 {
		require.NoError(t, pub2.Publish(ctx, payload))
	}
	require.NoError(t, pub2.Close(ctx))
	require.Equal(t, udp.BlackHolePacketSize, udp.ConnStatsFrom(c.Conn().Context()).Snapshot().MTU)
	require.LessOrEqual(t, c.Redials(), uint64(2))
	require.Contains(t, logs.String(), "connection path stalled; redialling")
	t.Logf("stall to redialled: %v; relay dropped %d datagrams", recovered, proxy.Dropped.Load())
}

// On loopback the path MTU is guaranteed, so probe timeouts and silence
// there are a busy (here: frozen) machine, not a black hole: the client
// waits instead of redialling, and the publish that was in flight
// completes on the same connection once the path moves again.
func TestLoopbackSilenceIsNotAStalledPath(t *testing.T) {
	h := startBroker(t, broker.Config{})
	proxy, err := impair.New(h.addr)
	require.NoError(t, err)
	defer proxy.Close()
	ctx := ctxT(t, 30*time.Second)
	// The silent-peer close (a broker not heard from for 2 s is taken for
	// dead) is not what this test is about: on a loaded machine it came
	// before the probe timeouts the test waits for.
	c, err := client.Dial(ctx, proxy.Addr(), client.Config{Tenant: "t1", TLS: h.clientTLS, BlackHoleCooldown: time.Minute,
		SilentPeerTimeout: -1})
	require.NoError(t, err)
	defer c.Close()
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, make([]byte, 4096)))

	proxy.SetBlackHole(true)
	done := make(chan error, 1)
	go func() { done <- pub.Publish(ctx, make([]byte, 4096)) }()
	// Long enough for udp.StallPTOs probe timeouts and the watchdog's quiet
	// checks, which on a path that is not guaranteed redial (the test above).
	require.Eventually(t, func() bool { return udp.Stalled(udp.ConnStatsFrom(c.Conn().Context()).Snapshot()) },
		10*time.Second, 10*time.Millisecond)
	proxy.SetBlackHole(false)
	require.NoError(t, <-done)
	require.Zero(t, c.Redials())
}

// A subscription whose connection the client replaced after a stall
// resumes on the new connection at the offset after its last event: on a
// durable stream every record arrives once and in order; on an ephemeral
// stream what the broker's ring no longer holds is reported as a gap, so
// delivered + dropped is what was published. The stall is the client's to
// see, so it publishes full-size packets on the same connection.
func TestSubscriptionResumesAfterRedial(t *testing.T) {
	for _, durable := range []bool{true, false} {
		name := map[bool]string{true: "durable", false: "ephemeral"}[durable]
		t.Run(name, func(t *testing.T) {
			spec := durableSpec("s", "periodic")
			if !durable {
				spec.Durable, spec.Fsync = false, ""
			}
			h := serveBroker(t, broker.Config{DataDir: t.TempDir(), RingEvents: 64}, spec)
			proxy, err := impair.New(h.addr)
			require.NoError(t, err)
			defer proxy.Close()
			ctx := ctxT(t, 60*time.Second)
			c, err := client.Dial(ctx, proxy.Addr(), client.Config{Tenant: "t1", TLS: h.clientTLS,
				BlackHoleCooldown: time.Minute, InitialMTU: udp.MaxPacketSize})
			require.NoError(t, err)
			defer c.Close()
			sub, err := c.Subscribe(ctx, "default", "s", client.SubscribeOptions{})
			require.NoError(t, err)
			stalling, err := c.NewPublisher(ctx, "default", "s")
			require.NoError(t, err)
			for i := range 100 {
				require.NoError(t, stalling.Publish(ctx, seq(uint64(i), 2048)))
			}
			require.NoError(t, expectSequence(ctx, sub, 0, 100))

			proxy.SetMaxDatagram(udp.BlackHolePacketSize)
			require.ErrorIs(t, stalling.Publish(ctx, make([]byte, 4096)), client.ErrPathStalled)
			pub, err := h.dial(t).NewPublisher(ctx, "default", "s")
			require.NoError(t, err)
			for i := 100; i < 300; i++ {
				require.NoError(t, pub.Publish(ctx, seq(uint64(i), 2048)))
			}
			var got, dropped uint64
			want := uint64(100)
			for got+dropped < 200 {
				ev, err := sub.Next(ctx)
				require.NoError(t, err)
				if ev.Dropped != 0 {
					require.False(t, durable, "a durable subscription never drops")
					dropped += ev.Dropped
					want += ev.Dropped
					continue
				}
				require.Equal(t, want, ev.Offset, "in order, no duplicate")
				require.Equal(t, want, seqOf(ev.Payload))
				want++
				got++
			}
			require.GreaterOrEqual(t, sub.Resumes(), uint64(1))
			t.Logf("%s: %d delivered, %d reported lost, %d redials", name, got, dropped, c.Redials())
		})
	}
}
