package broker

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/wire"
)

// Admission: a connection slot is only held by a peer that authenticates.
//
//   - A connection none of whose streams authenticated within AuthTimeout
//     is closed (CloseUnauthenticated): keep-alives alone no longer keep a
//     slot.
//   - At MaxConnections, or at MaxConnectionsPerSource for the new peer's
//     address, a handshake closes the oldest connection (of that address,
//     for the per-source limit) that has authenticated nothing, and is
//     refused only when every counted connection has authenticated. Idle
//     unauthenticated connections therefore never lock clients out; a
//     peer evicting others' fresh connections must complete a handshake
//     per eviction, and a client authenticates within a round trip of its
//     own.

const connErrUnauthenticated = quic.ApplicationErrorCode(wire.CloseUnauthenticated)

// admit decides a handshake from peer: nil admits it, having evicted an
// unauthenticated connection if that is what makes room.
func (b *Broker) admit(peer net.Addr) error {
	victim, err := b.admitLocked(sourceOf(peer))
	if victim != nil {
		b.metrics.connUnauthenticated.WithLabelValues("evicted").Inc()
		victim.qc.CloseWithError(connErrUnauthenticated, "unauthenticated connection closed to admit another")
	}
	return err
}

func (b *Broker) admitLocked(ip netip.Addr) (victim *conn, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.mu.perSource[ip]; n >= b.cfg.MaxConnectionsPerSource {
		if victim = b.evictLocked(func(c *conn) bool { return c.source == ip }); victim != nil {
			return victim, nil
		}
		b.metrics.connRefusedSource.Inc()
		return nil, fmt.Errorf("%w: %d connections from %s, the most FELIX_MAX_CONNECTIONS_PER_SOURCE allows", ErrLimitExceeded, n, ip)
	}
	if n := len(b.mu.conns); n >= b.cfg.MaxConnections {
		if victim = b.evictLocked(func(*conn) bool { return true }); victim != nil {
			return victim, nil
		}
		b.metrics.connRefused.Inc()
		return nil, fmt.Errorf("%w: %d connections, the most FELIX_MAX_CONNECTIONS allows", ErrLimitExceeded, n)
	}
	return nil, nil
}

// evictLocked picks the oldest connection that match selects and that
// authenticated nothing, and forgets it at once so that it no longer
// counts; the caller closes it. nil if there is none.
func (b *Broker) evictLocked(match func(*conn) bool) *conn {
	var oldest *conn
	for c := range b.mu.conns {
		if !c.state.authed.Load() && match(c) && (oldest == nil || c.opened.Before(oldest.opened)) {
			oldest = c
		}
	}
	if oldest != nil {
		b.forgetLocked(oldest)
	}
	return oldest
}

// rememberLocked counts c as live.
func (b *Broker) rememberLocked(c *conn) {
	b.mu.conns[c] = struct{}{}
	b.mu.perSource[c.source]++
}

// forgetLocked stops counting c; a second call is a no-op.
func (b *Broker) forgetLocked(c *conn) {
	if _, ok := b.mu.conns[c]; !ok {
		return
	}
	delete(b.mu.conns, c)
	if b.mu.perSource[c.source]--; b.mu.perSource[c.source] <= 0 {
		delete(b.mu.perSource, c.source)
	}
}

// closeUnlessAuthenticated closes c if none of its streams has
// authenticated within AuthTimeout; the returned func disarms it.
func (c *conn) closeUnlessAuthenticated() (stop func()) {
	t := time.AfterFunc(c.b.cfg.AuthTimeout, func() {
		if !c.state.authed.Load() {
			c.b.metrics.connUnauthenticated.WithLabelValues("timeout").Inc()
			c.qc.CloseWithError(connErrUnauthenticated, "no stream authenticated within "+c.b.cfg.AuthTimeout.String())
		}
	})
	return func() { t.Stop() }
}

func sourceOf(a net.Addr) netip.Addr {
	ip, _ := peerIP(a)
	return ip
}
