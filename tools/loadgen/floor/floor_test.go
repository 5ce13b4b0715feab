package floor_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/tools/loadgen/floor"
	"github.com/felixmq/felix/udp"
	"github.com/felixmq/felix/wire"
)

// TestEchoAnswersEachRequestWithAnAck: the bare server answers every
// frame, whatever its size, with the bytes of the broker's ack.
func TestEchoAnswersEachRequestWithAnAck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pc, err := udp.Listen("udp", "127.0.0.1:0", udp.Config{})
	require.NoError(t, err)
	defer pc.Close()
	served := make(chan error, 1)
	go func() { served <- floor.ServeEcho(ctx, pc, cert.TLS, nil) }()
	e, err := floor.DialEcho(ctx, pc.LocalAddr().String(), cert.Fingerprint)
	require.NoError(t, err)
	for _, size := range []int{0, 256, 4096, 100_000} {
		_, err := e.RoundTrip(floor.Request(make([]byte, size)))
		require.NoError(t, err, "payload %d", size)
	}
	sent, received := e.Packets()
	require.NotZero(t, sent)
	require.NotZero(t, received)
	require.NoError(t, e.Close())
	cancel()
	require.NoError(t, <-served)
}

// TestRequestAndReplyAreTheAckedPublishAndItsAck: the bare round trip
// carries the bytes of a binary acked publish and of its ack.
func TestRequestAndReplyAreTheAckedPublishAndItsAck(t *testing.T) {
	req := floor.Request(make([]byte, 256))
	h, err := wire.ParseHeader(req, 0)
	require.NoError(t, err)
	var ap wire.AckedPublish
	require.NoError(t, wire.DecodeAckedPublishFlags(h.Flags, req[wire.HeaderLen:], &ap))
	require.Len(t, ap.Payloads, 1)
	require.Len(t, ap.Payloads[0], 256)
	rep := floor.Reply()
	h, err = wire.ParseHeader(rep, 0)
	require.NoError(t, err)
	var ack wire.PublishAck
	require.NoError(t, wire.DecodePublishAckFlags(h.Flags, rep[wire.HeaderLen:], &ack))
	require.True(t, ack.HasOffset)
}

// TestChildReportsItsCounts: a child started by StartChild serves, answers
// stats and exits when its stdin closes.
func TestChildReportsItsCounts(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	c, err := floor.StartChild(context.Background(), exe, "echo", nil, nil)
	require.NoError(t, err)
	e, err := floor.DialEcho(context.Background(), c.Addr, c.Fingerprint)
	require.NoError(t, err)
	s0, err := c.Stats()
	require.NoError(t, err)
	_, err = e.RoundTrip(floor.Request(bytes.Repeat([]byte{1}, 256)))
	require.NoError(t, err)
	s1, err := c.Stats()
	require.NoError(t, err)
	require.GreaterOrEqual(t, s1.Sub(s0).PacketsIn, uint64(1))
	require.NoError(t, e.Close())
	require.NoError(t, c.Close())
}
