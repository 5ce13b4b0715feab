package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

// closedWith waits until qc is closed and returns its application close
// code (0 if it was closed otherwise).
func closedWith(t *testing.T, qc *quic.Conn, within time.Duration) uint64 {
	t.Helper()
	select {
	case <-qc.Context().Done():
	case <-time.After(within):
		t.Fatalf("connection still open after %v", within)
	}
	var ae *quic.ApplicationError
	if errors.As(context.Cause(qc.Context()), &ae) {
		return uint64(ae.ErrorCode)
	}
	return 0
}

// TestIdleUnauthenticatedConnectionsLockNoOneOut: 50 connections that
// never open a stream held FELIX_MAX_CONNECTIONS=50 for as long as their
// keep-alives ran, and every new client was refused. Now a new client
// takes the slot of the oldest connection that authenticated nothing, and
// that one is told why.
func TestIdleUnauthenticatedConnectionsLockNoOneOut(t *testing.T) {
	h := startBroker(t, broker.Config{MaxConnections: 50})
	var idle []*quic.Conn
	for range 50 {
		idle = append(idle, h.keepAliveConn(t))
	}
	require.Eventually(t, func() bool { return len(h.b.Stats().Connections) == 50 }, 5*time.Second, 5*time.Millisecond)
	closed := func() (n int) {
		for _, qc := range idle {
			var ae *quic.ApplicationError
			if errors.As(context.Cause(qc.Context()), &ae) && uint64(ae.ErrorCode) == wire.CloseUnauthenticated {
				n++
			}
		}
		return n
	}
	for i := range 3 {
		start := time.Now()
		ctx := ctxT(t, 5*time.Second)
		pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
		require.NoError(t, err, "client %d connects while the table is full of idle connections", i)
		require.NoError(t, pub.Publish(ctx, []byte("in")))
		t.Logf("client %d connected and published in %v", i, time.Since(start))
		// The oldest by the broker's accept order, which under load need
		// not be the order they were dialled in.
		require.Eventually(t, func() bool { return closed() == i+1 }, 5*time.Second, 5*time.Millisecond,
			"an idle connection is closed for each client that came")
	}
	require.Equal(t, 3, closed(), "only as many closed as clients came")
}

// keepAliveConn is rawConn with keep-alives, as an attacker holding a
// slot would send them; they also make a close the peer missed (its one
// CONNECTION_CLOSE packet dropped) heard at the next one.
func (h *harness) keepAliveConn(t *testing.T) *quic.Conn {
	tlsConf := h.clientTLS.Clone()
	tlsConf.NextProtos = []string{broker.ALPN}
	qc, err := quic.DialAddr(ctxT(t, 10*time.Second), h.addr, tlsConf, &quic.Config{KeepAlivePeriod: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	return qc
}

// TestConnectionMustAuthenticate: a connection that opens no stream, or
// only streams that never authenticate, is closed at FELIX_AUTH_TIMEOUT_MS;
// one whose stream authenticated is not.
func TestConnectionMustAuthenticate(t *testing.T) {
	h := startBroker(t, broker.Config{AuthTimeout: 300 * time.Millisecond})
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	silent := h.keepAliveConn(t)
	str, err := silent.OpenStreamSync(ctx)
	require.NoError(t, err)
	str.Write([]byte("F")) // a stream, never an auth frame
	opened := time.Now()
	require.EqualValues(t, wire.CloseUnauthenticated, closedWith(t, h.keepAliveConn(t), 5*time.Second))
	require.EqualValues(t, wire.CloseUnauthenticated, closedWith(t, silent, 5*time.Second))
	require.GreaterOrEqual(t, time.Since(opened), 300*time.Millisecond)
	require.NoError(t, pub.Publish(ctx, []byte("still connected")))
}

// TestConnectionsPerSource: FELIX_MAX_CONNECTIONS_PER_SOURCE bounds one
// address's connections; past it, a handshake is refused when all of them
// have authenticated.
func TestConnectionsPerSource(t *testing.T) {
	h := startBroker(t, broker.Config{MaxConnectionsPerSource: 3})
	ctx := ctxT(t, 10*time.Second)
	for range 3 {
		_, err := h.dial(t).NewPublisher(ctx, "default", "demo")
		require.NoError(t, err)
	}
	_, err := client.Dial(ctx, h.addr, client.Config{Tenant: "t1", Token: "dev", TLS: h.clientTLS})
	var te *quic.TransportError
	require.ErrorAs(t, err, &te)
	require.Equal(t, quic.ConnectionRefused, te.ErrorCode)
}

// TestIdleClientKeepsItsConnection: a Client dialled and left idle past
// the auth timeout keeps its connection (Dial authenticated a stream on
// it), so an application that dials at start and publishes later is not
// broken by it, while a raw connection dialled alongside is closed.
func TestIdleClientKeepsItsConnection(t *testing.T) {
	h := startBroker(t, broker.Config{AuthTimeout: 200 * time.Millisecond})
	c := h.dial(t)
	first := c.Conn()
	require.EqualValues(t, wire.CloseUnauthenticated, closedWith(t, h.keepAliveConn(t), 5*time.Second))
	require.NoError(t, first.Context().Err(), "the client's connection authenticated at Dial")
	ctx := ctxT(t, 10*time.Second)
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, []byte("after the idle time")))
	require.Same(t, first, c.Conn())
}
