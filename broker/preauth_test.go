package broker_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

// announcer is the unauthenticated memory attack: on each of its streams
// a header announcing a frame of size bytes, then all of it but the last
// byte, for as long as QUIC flow control lets it write.
type announcer struct {
	size    uint32
	written atomic.Int64 // bytes Write accepted, all streams
	stopped atomic.Int64 // streams the broker stopped reading
}

func (a *announcer) run(ctx context.Context, qc *quic.Conn, streams int) {
	var wg sync.WaitGroup
	hdr := wire.AppendHeader(nil, 0, a.size)
	deadline, _ := ctx.Deadline()
	for range streams {
		str, err := qc.OpenStreamSync(ctx)
		if err != nil {
			return
		}
		wg.Go(func() {
			defer str.CancelWrite(0)
			str.SetWriteDeadline(deadline)
			if _, err := str.Write(hdr); err != nil {
				return
			}
			chunk := make([]byte, 16<<10)
			for left := int(a.size) - 1; left > 0; {
				n, err := str.Write(chunk[:min(len(chunk), left)])
				a.written.Add(int64(n))
				left -= n
				if err != nil {
					var se *quic.StreamError
					if errors.As(err, &se) {
						a.stopped.Add(1)
					}
					return
				}
			}
		})
	}
	wg.Wait()
}

// received is how many bytes the broker has received on each connection.
func received(b *broker.Broker) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, c := range b.Stats().Connections {
		out[c.ID] = c.BytesReceived
	}
	return out
}

// TestUnauthenticatedPeerCostIsBounded is the pre-auth memory attack: two
// connections with 64 streams each, never authenticating, each stream
// announcing a frame and sending all of it but the last byte. The frame
// reader used to grow each stream's buffer as bytes arrived and hand QUIC
// its credit back, so the bound was FELIX_MAX_FRAME_BYTES x streams x
// connections (3.49 GB of broker RSS in 10 s). Now a 16 MiB announcement
// ends its stream at the header (auth frames are at most 64 KiB); at 64 KiB
// only 16 streams per connection are read, and a connection's receive
// window stays at what those need until it authenticates: the broker holds
// at most 16 x 64 KiB of frames and receives about twice that per
// connection, while a well-behaved client connects and publishes.
func TestUnauthenticatedPeerCostIsBounded(t *testing.T) {
	h := startBroker(t, broker.Config{})
	for _, tc := range []struct {
		name    string
		size    uint32
		stopped bool // every stream is refused at its header
	}{
		{"16 MiB frames", 16 << 20, true},
		{"64 KiB frames", 64<<10 - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var wg sync.WaitGroup
			attackers := []*announcer{{size: tc.size}, {size: tc.size}}
			for _, a := range attackers {
				qc := h.rawConn(t)
				wg.Go(func() { a.run(ctx, qc, 64) })
			}
			peak := peakFrameBuffers(ctx, h.b)
			lat := healthyAcks(t, h, 20)
			<-ctx.Done()
			perConn := received(h.b)
			wg.Wait()
			t.Logf("%s: frame buffers peak %d KiB, broker received per connection %v bytes, attackers wrote %d + %d bytes; healthy client ack max %v",
				tc.name, peak()>>10, perConn, attackers[0].written.Load(), attackers[1].written.Load(), lat)
			// 16 streams on each of the 2 connections, each holding at most
			// one pre-auth frame: its header and a 64 KiB payload.
			require.LessOrEqual(t, peak(), int64(2*16*(64<<10+wire.HeaderLen)), "bytes held for incomplete frames")
			for id, n := range perConn {
				require.LessOrEqual(t, n, uint64(3<<20), "bytes the broker took in on connection %d", id)
			}
			if tc.stopped {
				require.EqualValues(t, 128, attackers[0].stopped.Load()+attackers[1].stopped.Load(), "streams refused at the header")
			}
		})
	}
}

// healthyAcks dials a client, publishes n acked records one at a time and
// returns the slowest ack.
func healthyAcks(t *testing.T, h *harness, n int) time.Duration {
	ctx := ctxT(t, 10*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	var slowest time.Duration
	for range n {
		start := time.Now()
		require.NoError(t, pub.Publish(ctx, binary.BigEndian.AppendUint32(nil, 1)))
		slowest = max(slowest, time.Since(start))
	}
	return slowest
}

// peakFrameBuffers samples b's frame buffer bytes until ctx ends; the
// returned func is the peak, to be read after ctx ended.
func peakFrameBuffers(ctx context.Context, b *broker.Broker) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			peak.Store(max(peak.Load(), b.Stats().Peers.FrameBufferBytes))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { <-done; return peak.Load() }
}

// TestFrameBuffersHaveABudget: authenticated streams announcing 16 MiB
// frames hold what arrives of them, within the broker's frame budget (here
// 4 MiB): the stream whose frame would go past it is ended with the
// reason, and the budget is whole again once the streams end.
//
// The streams are reset rather than the connection closed: a reset is
// retransmitted until acknowledged, while a CONNECTION_CLOSE is one packet,
// not sent again once the dialer's transport is gone. Behind megabytes of
// stream data it was lost (the broker's connection went on serving until
// its idle timeout, holding the buffers) in 11 of 80 runs.
func TestFrameBuffersHaveABudget(t *testing.T) {
	h := startBroker(t, broker.Config{FrameBufferBytes: 4 << 20})
	qc := h.rawConn(t)
	ctx := ctxT(t, 10*time.Second)
	var refused atomic.Int64
	var wg sync.WaitGroup
	var streams []*quic.Stream
	for range 4 {
		str, err := qc.OpenStreamSync(ctx)
		require.NoError(t, err)
		streams = append(streams, str)
		wg.Go(func() {
			str.Write(append(append([]byte{}, authFrame...), wire.AppendHeader(nil, 0, 16<<20)...))
			str.Write(make([]byte, 3<<20))
			reply := make([]byte, 4096)
			str.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				n, err := str.Read(reply)
				if bytes.Contains(reply[:n], []byte("budget")) {
					refused.Add(1)
				}
				if err != nil {
					return
				}
			}
		})
	}
	require.Eventually(t, func() bool { return refused.Load() > 0 }, 5*time.Second, 5*time.Millisecond,
		"the refused stream is told why")
	st := h.b.Stats().Peers
	require.Positive(t, st.FrameBufferRefusals)
	require.LessOrEqual(t, st.FrameBufferBytes, int64(4<<20))
	for _, str := range streams {
		str.CancelWrite(0)
	}
	wg.Wait()
	require.Eventually(t, func() bool { return h.b.Stats().Peers.FrameBufferBytes == 0 }, 5*time.Second, 5*time.Millisecond,
		"the budget is whole again")
}

// TestLimitRefusalsAreCodedAsLimits: the subscription limit's refusal was
// an uncoded message a client could take for something to retry; it now
// leads with limit_exceeded, which the client matches as ErrLimitExceeded.
func TestLimitRefusalsAreCodedAsLimits(t *testing.T) {
	h := startBroker(t, broker.Config{MaxSubscriptionsPerConn: 1})
	c := h.dial(t)
	ctx := ctxT(t, 10*time.Second)
	_, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	_, err = c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.ErrorIs(t, err, client.ErrLimitExceeded)
	require.ErrorContains(t, err, "limit_exceeded: max subscriptions per connection exceeded")
}
