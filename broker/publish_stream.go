package broker

import (
	"errors"
	"io"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// publishStream serves a client-opened unidirectional stream: auth, then
// publishes only, with no replies. Anything else ends the stream silently
// (STOP_SENDING) and is counted as a protocol violation, as in the published
// broker; `ack` and `request_id` fields are ignored here.
type publishStream struct {
	publisher
	str *quic.ReceiveStream
	fr  *frameio.Reader
}

func newPublishStream(c *conn, str *quic.ReceiveStream) *publishStream {
	return &publishStream{
		publisher: newPublisher(c, int64(str.StreamID())),
		str:       str,
		fr:        frameio.NewReader(str, c.b.cfg.MaxFrameBytes),
	}
}

func (ps *publishStream) serve() {
	if err := ps.run(); err != nil && !errors.Is(err, io.EOF) {
		ps.c.b.metrics.protocolViolation("uni")
		ps.c.b.log.Debug("publish stream closed", "conn", ps.c.id, "err", err)
		ps.str.CancelRead(streamErrProtocol)
	}
}

var errUniViolation = errors.New("publish stream: only auth and publishes are allowed")

func (ps *publishStream) run() error {
	h, payload, err := ps.fr.Next()
	if err != nil {
		return err
	}
	m, err := decodeJSON(h, payload)
	auth, ok := m.(*wire.Auth)
	if err != nil || !ok {
		return errUniViolation
	}
	if ps.principal, err = ps.c.b.verifier.Verify(ps.c.ctx, auth.TenantID, auth.Token); err != nil {
		return err
	}
	for {
		h, payload, err := ps.fr.Next()
		if err != nil {
			return err
		}
		if err := ps.dispatch(h, payload); err != nil {
			return err
		}
	}
}

func (ps *publishStream) dispatch(h wire.Header, payload []byte) error {
	switch h.Kind() {
	case wire.KindPublishBatch:
		if err := wire.DecodePublishBatch(payload, &ps.batch); err != nil {
			return err
		}
		b := &ps.batch
		_, err := ps.publish(streamKey(b.TenantID, b.Namespace, b.Stream), nil, b.Payloads, false)
		return err
	case wire.KindJSON:
		m, err := wire.DecodeJSON(payload)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *wire.Publish:
			ps.one[0] = m.Payload
			_, err = ps.publish(streamKey(m.TenantID, m.Namespace, m.Stream), keyBytes(m.Key), ps.one[:], false)
			return err
		case *wire.PublishBatchMessage:
			_, err = ps.publish(streamKey(m.TenantID, m.Namespace, m.Stream), keyBytes(m.Key), m.Payloads, false)
			return err
		}
	}
	return errUniViolation
}

func keyBytes(k *string) []byte {
	if k == nil {
		return nil
	}
	return []byte(*k)
}
