package client

import (
	"context"
	"fmt"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/wire"
)

// RaftStream is a broker's replication stream to another broker
// (wire.CapRaft): after its auth it carries only RaftBatch frames, one way.
// Only a Client whose Config.Flags include wire.CapForwarded and
// wire.CapRaft, with a node credential for its token, may open one; the
// broker package's raft transport writes on it (cmd/felix-broker gives the
// broker a dialer built on this).
type RaftStream struct {
	str  *quic.Stream
	sess *session
}

// OpenRaftStream opens and authenticates a replication stream.
func (c *Client) OpenRaftStream(ctx context.Context) (*RaftStream, error) {
	if !wire.Supports(c.cfg.Flags, wire.CapRaft|wire.CapForwarded) {
		return nil, fmt.Errorf("%w: a raft stream needs Config.Flags with wire.CapRaft and wire.CapForwarded", ErrInvalidConfig)
	}
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	if !wire.Supports(ct.flags, wire.CapRaft) {
		ct.str.CancelWrite(0)
		ct.str.CancelRead(0)
		return nil, fmt.Errorf("%w: the broker does not take raft streams", ErrNotNegotiated)
	}
	return &RaftStream{str: ct.str, sess: ct.sess}, nil
}

// Write writes one or more whole frames.
func (s *RaftStream) Write(frames []byte) error {
	if _, err := s.str.Write(frames); err != nil {
		return s.sess.wrap(fmt.Errorf("client: raft stream: %w", err))
	}
	return nil
}

// Done is closed when the stream's connection ends.
func (s *RaftStream) Done() <-chan struct{} { return s.sess.qc.Context().Done() }

// Close ends the stream.
func (s *RaftStream) Close() error {
	s.str.CancelRead(0)
	return s.str.Close()
}
