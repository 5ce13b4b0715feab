package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// QUIC application error codes. Stream codes travel in RESET_STREAM and
// STOP_SENDING; connection codes in CONNECTION_CLOSE.
const (
	streamErrProtocol          quic.StreamErrorCode = 0x10 // framing lost or protocol violation
	streamErrAuth              quic.StreamErrorCode = 0x11 // auth missing or refused
	streamErrSubscriptionEnded quic.StreamErrorCode = 0x12
	streamErrShutdown          quic.StreamErrorCode = 0x13
	streamErrSlowConsumer      quic.StreamErrorCode = quic.StreamErrorCode(wire.StreamSlowConsumer)

	connErrShutdown = quic.ApplicationErrorCode(wire.CloseShutdown)
)

// conn is one client connection and everything it opened.
type conn struct {
	b   *Broker
	qc  *quic.Conn
	id  uint64
	ctx context.Context // ends with the connection
	// pollWaiters counts the group polls waiting for records on this
	// connection's streams (bounded: each holds a goroutine).
	pollWaiters atomic.Int64

	mu struct {
		sync.Mutex
		subs map[uint64]*subscription
		// Roster watches and group members: like subscriptions they own
		// an event stream and end with the connection.
		extras map[uint64]ender
		// Roster members this connection joined, left when it closes.
		joined map[membership]struct{}
		// who is what its first authenticated stream presented, and
		// published the streams it published to (a few): for stats.
		who       connIdentity
		published []string
	}
	streams sync.WaitGroup // stream handlers and subscription writers

	state   *connState
	frames  *byteBudget   // bytes its streams hold for incomplete frames
	preauth chan struct{} // a slot per stream reading its auth frame
	source  netip.Addr    // the peer's address, for per-source limits
	opened  time.Time
}

func newConn(b *Broker, qc *quic.Conn) *conn {
	c := &conn{b: b, qc: qc, id: b.nextConnID.Add(1), ctx: qc.Context(),
		source: sourceOf(qc.RemoteAddr()), opened: time.Now(),
		frames:  newByteBudget(int64(b.cfg.ConnectionReceiveWindow), b.frames),
		preauth: make(chan struct{}, b.cfg.PreAuthMaxStreams)}
	if c.state = stateOf(c.ctx); c.state == nil {
		c.state = &connState{}
	}
	c.mu.subs = map[uint64]*subscription{}
	c.mu.extras = map[uint64]ender{}
	c.mu.joined = map[membership]struct{}{}
	return c
}

// serve runs until the connection ends, then tears down what it owned.
func (c *conn) serve() {
	log := c.b.log.With("conn", c.id, "remote", c.qc.RemoteAddr().String())
	log.Debug("connection accepted")
	defer c.closeUnlessAuthenticated()()
	c.streams.Add(1)
	go func() { defer c.streams.Done(); c.acceptUni() }()
	if iv := c.b.cfg.ConnStatsInterval; iv > 0 {
		c.streams.Add(1)
		go func() { defer c.streams.Done(); c.logStats(log, iv) }()
	}
	for c.takePreAuthSlot() {
		str, err := c.qc.AcceptStream(c.ctx)
		if err != nil {
			c.releasePreAuthSlot()
			break
		}
		c.streams.Add(1)
		go func() { defer c.streams.Done(); newControl(c, str).serve() }()
	}
	for _, s := range c.subscriptions() {
		s.end()
	}
	c.endExtras()
	c.streams.Wait()
	cause := context.Cause(c.ctx)
	log.Debug("connection closed", "err", cause)
	c.b.stalls.noteClose(c.qc.RemoteAddr(), cause)
}

func (c *conn) acceptUni() {
	for c.takePreAuthSlot() {
		str, err := c.qc.AcceptUniStream(c.ctx)
		if err != nil {
			c.releasePreAuthSlot()
			return
		}
		c.streams.Add(1)
		go func() { defer c.streams.Done(); newPublishStream(c, str).serve() }()
	}
}

// frameReader reads str's frames within the connection's frame budget,
// with the pre-auth frame limit until the stream has authenticated.
func (c *conn) frameReader(str io.Reader) *frameio.Reader {
	return newFrameReader(str, c.b.cfg, c.frames)
}

// takePreAuthSlot waits until fewer than PreAuthMaxStreams streams of the
// connection are reading their auth frame; false once it has ended. The
// stream accepted next releases the slot when its auth is decided.
func (c *conn) takePreAuthSlot() bool {
	select {
	case c.preauth <- struct{}{}:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (c *conn) releasePreAuthSlot() { <-c.preauth }

// authenticated records that the stream read by fr authenticated: its
// frames may now be MaxFrameBytes, and the connection may grow its receive
// window.
func (c *conn) authenticated(fr *frameio.Reader) {
	c.state.authed.Store(true)
	liftFrameLimit(fr, c.b.cfg)
}

func (c *conn) add(s *subscription) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.subs)+len(c.mu.extras) >= c.b.cfg.MaxSubscriptionsPerConn {
		return errTooManySubs
	}
	c.mu.subs[s.id] = s
	return nil
}

// errTooManySubs is a limit, not a failure to retry: its message leads
// with limit_exceeded, as the typed error code of the published Felix.
var errTooManySubs = fmt.Errorf("%w: max subscriptions per connection exceeded", ErrLimitExceeded)

func (c *conn) forget(s *subscription) {
	c.mu.Lock()
	delete(c.mu.subs, s.id)
	c.mu.Unlock()
}

func (c *conn) subscriptions() []*subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*subscription, 0, len(c.mu.subs))
	for _, s := range c.mu.subs {
		out = append(out, s)
	}
	return out
}

// drain waits, within ctx, until every subscription of this connection has
// written what its queue holds, lingers briefly so the last stream data can
// reach the peer, and closes the connection with a reason.
func (c *conn) drain(ctx context.Context) {
	for _, s := range c.subscriptions() {
		s.drainTo(ctx)
	}
	if ctx.Err() == nil {
		// quic-go reports no "peer acknowledged all stream data" event, so
		// give the send loop a few round trips to deliver the tail.
		linger := 4 * c.qc.ConnectionStats().SmoothedRTT
		linger = min(max(linger, 20*time.Millisecond), time.Second)
		t := time.NewTimer(linger)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	c.qc.CloseWithError(connErrShutdown, "broker shutting down")
}

// logStats logs the connection's statistics every interval until it ends:
// the diagnostic that finds a connection stuck in a bad state (a collapsed
// MTU, a loss storm) while a benchmark runs.
func (c *conn) logStats(log *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			s := c.stats()
			log.Info("conn stats", "rtt", s.SmoothedRTT, "min_rtt", s.MinRTT, "cwnd", s.CongestionWnd,
				"mtu", s.Path.MTU, "lost", s.PacketsLost, "congestion_events", s.Path.CongestionEvents,
				"queue_drops", s.Path.QueueDrops, "ecn", s.Path.ECNState, "gso", s.GSO,
				"bytes_sent", s.BytesSent, "bytes_received", s.BytesReceived)
		}
	}
}

// peerGone reports a read error that is the transport ending (the client
// closed its connection or reset the stream, the path timed out, the broker
// is closing), not something the peer sent: there is nobody to answer and
// nothing to count as a violation.
func peerGone(err error) bool {
	var (
		ae *quic.ApplicationError
		se *quic.StreamError
		ie *quic.IdleTimeoutError
		sr *quic.StatelessResetError
		te *quic.TransportError
	)
	return errors.As(err, &ae) || errors.As(err, &se) || errors.As(err, &ie) || errors.As(err, &sr) ||
		errors.As(err, &te) || errors.Is(err, net.ErrClosed)
}
