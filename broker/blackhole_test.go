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
)

// TestMTUBlackHoleRedial proves the stall path of docs/design.md,
// "Transport": the
// path's MTU drops below the connection's packet size mid-stream (a relay
// starts dropping datagrams over 1200 bytes), quic-go keeps losing its
// full-size packets and probes, the client's watchdog sees the probe
// timeouts, closes the connection and redials at 1200 with discovery off;
// the publisher that was on it fails with ErrPathStalled and a new one
// works through the same relay.
func TestMTUBlackHoleRedial(t *testing.T) {
	h := startBroker(t, broker.Config{})
	proxy, err := impair.New(h.addr)
	require.NoError(t, err)
	defer proxy.Close()

	logs := &syncBuffer{}
	cfg := client.Config{Tenant: "t1", TLS: h.clientTLS, BlackHoleCooldown: time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
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
