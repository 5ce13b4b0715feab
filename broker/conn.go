package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

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

	mu struct {
		sync.Mutex
		subs map[uint64]*subscription
		// Roster watches and queue consumers: like subscriptions they own
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
}

func newConn(b *Broker, qc *quic.Conn) *conn {
	c := &conn{b: b, qc: qc, id: b.nextConnID.Add(1), ctx: qc.Context()}
	c.mu.subs = map[uint64]*subscription{}
	c.mu.extras = map[uint64]ender{}
	c.mu.joined = map[membership]struct{}{}
	return c
}

// serve runs until the connection ends, then tears down what it owned.
func (c *conn) serve() {
	log := c.b.log.With("conn", c.id, "remote", c.qc.RemoteAddr().String())
	log.Debug("connection accepted")
	c.streams.Add(1)
	go func() { defer c.streams.Done(); c.acceptUni() }()
	if iv := c.b.cfg.ConnStatsInterval; iv > 0 {
		c.streams.Add(1)
		go func() { defer c.streams.Done(); c.logStats(log, iv) }()
	}
	for {
		str, err := c.qc.AcceptStream(c.ctx)
		if err != nil {
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
	for {
		str, err := c.qc.AcceptUniStream(c.ctx)
		if err != nil {
			return
		}
		c.streams.Add(1)
		go func() { defer c.streams.Done(); newPublishStream(c, str).serve() }()
	}
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

var errTooManySubs = errors.New("max subscriptions per connection exceeded")

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
