package client

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A port nothing listens on fails Dial with ErrConnectionRefused as soon
// as the host says so, not at the end of the context's 30 s.
func TestDialRefusedPortFailsAtOnce(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := pc.LocalAddr().String()
	require.NoError(t, pc.Close()) // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Dial(ctx, addr, Config{Tenant: "t1", Token: "dev", TLS: &tls.Config{}})
	require.ErrorIs(t, err, ErrConnectionRefused)
	require.NoError(t, ctx.Err(), "refused before the deadline")
}
