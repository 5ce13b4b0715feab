package broker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// publishStream serves a client-opened unidirectional stream: auth, then
// publishes only, with no replies. Anything else ends the stream silently
// (STOP_SENDING); broken frames and messages other than publishes are
// counted as protocol violations, as in the published broker (a refused
// publish is not one). `ack` and `request_id` fields are ignored here.
type publishStream struct {
	publisher
	str *quic.ReceiveStream
	fr  *frameio.Reader
}

func newPublishStream(c *conn, str *quic.ReceiveStream) *publishStream {
	return &publishStream{
		publisher: newPublisher(c, int64(str.StreamID())),
		str:       str,
		fr:        c.frameReader(str),
	}
}

func (ps *publishStream) serve() {
	defer ps.fr.Release()
	err := ps.run()
	if err == nil || errors.Is(err, io.EOF) || peerGone(err) {
		return
	}
	if errors.Is(err, errUniViolation) {
		ps.c.b.metrics.protocolViolation("uni")
	}
	ps.c.b.log.Debug("publish stream closed", "conn", ps.c.id, "err", err)
	ps.str.CancelRead(streamErrProtocol)
}

var errUniViolation = errors.New("publish stream: only auth and publishes are allowed")

func (ps *publishStream) run() error {
	auth, err := ps.authenticate()
	ps.c.releasePreAuthSlot()
	if err != nil {
		return err
	}
	ps.c.authenticated(ps.fr)
	ps.forwarded = wire.Supports(wire.PeerSet(auth.ClientFlags, auth.ClientCaps), wire.CapForwarded)
	ps.c.noteAuth(ps.principal, ps.forwarded)
	// At expiry the stream is stopped with the auth code: the client sees
	// why and authenticates a new stream.
	defer atExpiry(ps.principal, func() { ps.str.CancelRead(streamErrAuth) })()
	for {
		h, payload, err := ps.fr.Next()
		if err != nil && !errors.Is(err, io.EOF) && !peerGone(err) && !errors.Is(err, frameio.ErrBudget) {
			return fmt.Errorf("%w: %w", errUniViolation, err)
		}
		if err != nil {
			return err
		}
		if err := ps.dispatch(h, payload); err != nil {
			return err
		}
	}
}

// authenticate reads and verifies the auth frame.
func (ps *publishStream) authenticate() (*wire.Auth, error) {
	ps.str.SetReadDeadline(time.Now().Add(ps.c.b.cfg.AuthTimeout))
	h, payload, err := ps.fr.Next()
	ps.str.SetReadDeadline(time.Time{})
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			ps.c.b.metrics.authTimeouts.Inc()
		case !errors.Is(err, io.EOF) && !peerGone(err):
			err = fmt.Errorf("%w: %w", errUniViolation, err)
		}
		return nil, err
	}
	m, err := decodeJSON(h, payload)
	auth, ok := m.(*wire.Auth)
	if err != nil || !ok {
		return nil, errUniViolation
	}
	if ps.principal, err = ps.c.b.verify(ps.c.ctx, auth); err != nil {
		ps.c.b.authRefused(ps.c.id, auth, err)
		return nil, err
	}
	return auth, nil
}

func (ps *publishStream) dispatch(h wire.Header, payload []byte) error {
	switch h.Kind() {
	case wire.KindPublishBatch:
		if err := wire.DecodePublishBatchFlags(h.Flags, payload, &ps.batch); err != nil {
			return fmt.Errorf("%w: %w", errUniViolation, err)
		}
		b := &ps.batch
		return ps.publishUnacked(streamKey(b.TenantID, b.Namespace, b.Stream), batchKey(b), batchShard(b), b.Payloads, b.Headers)
	case wire.KindJSON:
		m, err := wire.DecodeJSON(payload)
		if err != nil {
			return fmt.Errorf("%w: %w", errUniViolation, err)
		}
		switch m := m.(type) {
		case *wire.Publish:
			ps.one[0] = m.Payload
			return ps.publishUnacked(streamKey(m.TenantID, m.Namespace, m.Stream), m.Key, shardArg(m.Shard), ps.one[:], nil)
		case *wire.PublishBatchMessage:
			return ps.publishUnacked(streamKey(m.TenantID, m.Namespace, m.Stream), m.Key, shardArg(m.Shard), m.Payloads, nil)
		}
	}
	return errUniViolation
}

// publishUnacked publishes without a reply channel: a failure known at once
// ends the stream; one known later (a failed sync) can only be logged.
func (ps *publishStream) publishUnacked(k StreamKey, key []byte, shard int, payloads, headers [][]byte) error {
	return ps.publish(k, key, shard, payloads, headers, false, func(_ publishResult, err error) {
		if err != nil {
			ps.c.b.log.Debug("fire-and-forget publish failed", "conn", ps.c.id, "stream", k.String(), "err", err)
		}
	})
}
