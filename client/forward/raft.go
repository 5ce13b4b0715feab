package forward

import (
	"context"
	"errors"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// RaftTenant is the tenant a replication stream claims: the stream serves
// no tenant (the node credential authorises it), but an auth frame names
// one.
const RaftTenant = "felix.raft"

// RaftConn is one replication stream to another broker (it implements
// broker.RaftConn), on a QUIC connection of its own, so replication never
// waits behind forwarded publishes.
type RaftConn struct {
	c      *client.Client
	s      *client.RaftStream
	token  string
	tokenf func() string
}

// DialRaft opens a replication stream to broker m with the node credential
// (it is the broker's RaftDialer).
func (f *Forwarder) DialRaft(ctx context.Context, m cluster.Member) (*RaftConn, error) {
	if m.QUICAddr == "" {
		return nil, errors.New("forward: broker " + m.ID + " has no address")
	}
	token := f.token()
	c, err := client.Dial(ctx, m.QUICAddr, client.Config{
		Tenant: RaftTenant, Token: token, TLS: f.cfg.TLS, Logger: f.cfg.Logger,
		Flags: wire.KnownCapabilities | wire.CapForwarded | wire.CapRaft,
	})
	if err != nil {
		return nil, err
	}
	s, err := c.OpenRaftStream(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &RaftConn{c: c, s: s, token: token, tokenf: f.token}, nil
}

// errRenewed ends a stream opened with a credential since renewed: the
// receiver would end it when that credential expires, so the sender
// redials with the new one first.
var errRenewed = errors.New("forward: node credential renewed; redial")

// Write writes whole RaftBatch frames.
func (r *RaftConn) Write(frames []byte) error {
	if r.tokenf() != r.token {
		return errRenewed
	}
	return r.s.Write(frames)
}

// Done is closed when the connection ends.
func (r *RaftConn) Done() <-chan struct{} { return r.s.Done() }

// Close ends the stream and its connection.
func (r *RaftConn) Close() error {
	r.s.Close()
	return r.c.Close()
}
