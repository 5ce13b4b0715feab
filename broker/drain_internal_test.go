package broker

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
)

// A draining broker refuses a new connection at once (CONNECTION_REFUSED)
// while its connections drain. It used to close its listener first, so
// quic-go dropped the handshake from a socket still open: a client
// redirected there (an idempotent publisher sent to the old leader during
// a hand-off) waited out its dial timeout, and acks paused that long.
func TestDrainingBrokerRefusesNewConnections(t *testing.T) {
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	b, err := New(Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}}, ListenAddrs: []string{pc.LocalAddr().String()}})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- b.Serve(pc) }()
	<-b.Listening()
	ccfg := client.Config{Tenant: "t1", Token: "dev", TLS: &tls.Config{RootCAs: pool}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, pc.LocalAddr().String(), ccfg)
	require.NoError(t, err)
	defer c.Close()

	b.inflight.Add(1) // a publish in flight: the drain waits for it
	drained := make(chan error, 1)
	go func() { drained <- b.Drain(ctx) }()
	require.Eventually(t, func() bool { return !b.Ready() }, 10*time.Second, time.Millisecond)
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	_, err = client.Dial(dctx, pc.LocalAddr().String(), ccfg)
	var te *quic.TransportError
	require.ErrorAs(t, err, &te, "refused, not left to time out")
	require.Equal(t, quic.ConnectionRefused, te.ErrorCode)
	b.inflight.Add(-1)
	require.NoError(t, <-drained)
	require.NoError(t, <-served)
}
