package wirevector

import (
	"errors"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Decoded is a frame decoded through the wire package.
type Decoded struct {
	Header wire.Header
	Kind   wire.Kind
	JSON   wire.Message // KindJSON only
	Fields Vector       // binary kinds: the decoded fields in vector form
}

// binaryMsg holds one decoded or described binary frame; Kind says which
// member is meaningful.
type binaryMsg struct {
	kind  wire.Kind
	flags wire.Flags
	batch wire.AckedPublish // publish batches (acked or not)
	ack   wire.PublishAck
	event wire.EventBatch
}

// Decode decodes one whole frame: frame must hold exactly one frame.
// maxFrame 0 means wire.DefaultMaxFrameBytes.
func Decode(frame []byte, maxFrame uint32) (Decoded, error) {
	h, payload, rest, err := wire.SplitFrame(frame, maxFrame)
	if err != nil {
		return Decoded{}, err
	}
	if len(rest) != 0 {
		return Decoded{}, fmt.Errorf("%d bytes after the frame: %w", len(rest), wire.ErrTrailingBytes)
	}
	d := Decoded{Header: h, Kind: h.Kind()}
	if d.Kind == wire.KindJSON {
		d.JSON, err = wire.DecodeJSON(payload)
		return d, err
	}
	b := binaryMsg{kind: d.Kind, flags: h.Flags}
	switch d.Kind {
	case wire.KindPublishBatch:
		err = wire.DecodePublishBatch(payload, &b.batch.PublishBatch)
	case wire.KindAckedPublishBatch:
		err = wire.DecodeAckedPublish(payload, &b.batch)
	case wire.KindPublishAck:
		err = wire.DecodePublishAck(payload, &b.ack)
	default:
		err = wire.DecodeEventBatch(h.Flags, payload, &b.event)
	}
	if err != nil {
		return Decoded{}, err
	}
	d.Fields = b.toVector()
	return d, nil
}

// Encode builds the vector's frame through the wire encoders. A JSON
// vector's message is payload_json decoded; a binary one is built from its
// fields.
func Encode(v Vector) ([]byte, error) {
	if v.PayloadJSON != nil {
		m, err := wire.DecodeJSON([]byte(*v.PayloadJSON))
		if err != nil {
			return nil, err
		}
		return wire.AppendJSONFrame(nil, m), nil
	}
	b, err := fromVector(v)
	if err != nil {
		return nil, err
	}
	return b.encode()
}

func (b *binaryMsg) encode() ([]byte, error) {
	p := &b.batch
	switch b.kind {
	case wire.KindPublishBatch:
		return wire.AppendPublishBatchFrame(nil, p.TenantID, p.Namespace, p.Stream, p.Payloads)
	case wire.KindAckedPublishBatch:
		return wire.AppendAckedPublishFrame(nil, p.RequestID, p.Mode, p.TenantID, p.Namespace, p.Stream, p.Payloads)
	case wire.KindPublishAck:
		return wire.AppendPublishAckFrame(nil, b.ack)
	}
	return wire.AppendEventBatchFrame(nil, b.event)
}

// fromVector builds the binary message a vector describes.
func fromVector(v Vector) (binaryMsg, error) {
	k, ok := wire.ParseKind(v.Kind)
	if !ok || k == wire.KindJSON {
		return binaryMsg{}, fmt.Errorf("unknown kind %q (and no payload_json)", v.Kind)
	}
	if v.Flags == nil {
		return binaryMsg{}, errors.New("binary vector without flags")
	}
	b := binaryMsg{kind: k, flags: wire.Flags(*v.Flags)}
	if fk, err := wire.KindFromFlags(b.flags); err != nil || fk != k {
		return binaryMsg{}, fmt.Errorf("flags %s do not select kind %s", b.flags, k)
	}
	payloads, err := payloadsOf(v)
	if err != nil {
		return binaryMsg{}, err
	}
	switch k {
	case wire.KindPublishBatch, wire.KindAckedPublishBatch:
		err = b.batchFromVector(v, payloads)
	case wire.KindPublishAck:
		err = b.ackFromVector(v)
	default:
		b.event = wire.EventBatch{
			Shared:        k == wire.KindEventBatchShared,
			HasBaseOffset: b.flags&wire.FlagEventBatchOffsets != 0,
			Payloads:      payloads,
		}
		b.event.SubscriptionID = deref(v.SubscriptionID)
		b.event.BaseOffset = deref(v.BaseOffset)
		if b.event.HasBaseOffset != (v.BaseOffset != nil) {
			err = errors.New("base_offset must be set exactly when flags have 0x0020")
		}
	}
	return b, err
}

func (b *binaryMsg) batchFromVector(v Vector, payloads [][]byte) error {
	p := &b.batch
	p.TenantID, p.Namespace, p.Stream = derefStr(v.TenantID), derefStr(v.Namespace), derefStr(v.Stream)
	p.Payloads = payloads
	if b.kind == wire.KindPublishBatch {
		return nil
	}
	if v.RequestID == nil || v.AckMode == nil {
		return errors.New("acked publish vector needs request_id and ack_mode")
	}
	p.RequestID = *v.RequestID
	mode, ok := wire.ParseAckMode(*v.AckMode)
	if !ok {
		return fmt.Errorf("unknown ack_mode %q", *v.AckMode)
	}
	p.Mode = mode
	return nil
}

func (b *binaryMsg) ackFromVector(v Vector) error {
	if v.Status == nil || v.RequestID == nil {
		return errors.New("publish ack vector needs status and request_id")
	}
	switch *v.Status {
	case "ok":
		b.ack.Status = wire.AckOK
	case "error":
		b.ack.Status = wire.AckError
	default:
		return fmt.Errorf("unknown status %q", *v.Status)
	}
	b.ack.RequestID = *v.RequestID
	b.ack.Message = derefStr(v.Message)
	return nil
}

// toVector renders the message as vector fields (no name, no hex).
func (b *binaryMsg) toVector() Vector {
	flags := uint16(b.flags)
	v := Vector{Kind: b.kind.String(), Flags: &flags}
	switch b.kind {
	case wire.KindAckedPublishBatch:
		v.RequestID = ptr(b.batch.RequestID)
		v.AckMode = ptr(b.batch.Mode.String())
		fallthrough
	case wire.KindPublishBatch:
		v.TenantID, v.Namespace, v.Stream = ptr(b.batch.TenantID), ptr(b.batch.Namespace), ptr(b.batch.Stream)
		v.setPayloads(b.batch.Payloads)
	case wire.KindPublishAck:
		v.Status = ptr(b.ack.Status.String())
		v.RequestID = ptr(b.ack.RequestID)
		if b.ack.Message != "" {
			v.Message = ptr(b.ack.Message)
		}
	default:
		if !b.event.Shared {
			v.SubscriptionID = ptr(b.event.SubscriptionID)
		}
		if b.event.HasBaseOffset {
			v.BaseOffset = ptr(b.event.BaseOffset)
		}
		v.setPayloads(b.event.Payloads)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
