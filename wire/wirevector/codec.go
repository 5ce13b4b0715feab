package wirevector

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

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
		err = wire.DecodePublishBatchFlags(h.Flags, payload, &b.batch.PublishBatch)
	case wire.KindAckedPublishBatch:
		err = wire.DecodeAckedPublishFlags(h.Flags, payload, &b.batch)
	case wire.KindPublishAck:
		err = wire.DecodePublishAckFlags(h.Flags, payload, &b.ack)
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
	var frame []byte
	var err error
	switch b.kind {
	case wire.KindPublishBatch:
		frame, err = wire.AppendPublish(nil, &b.batch.PublishBatch)
	case wire.KindAckedPublishBatch:
		frame, err = wire.AppendAckedPublish(nil, &b.batch)
	case wire.KindPublishAck:
		frame, err = wire.AppendPublishAckFrame(nil, b.ack)
	default:
		frame, err = wire.AppendEventBatchFrame(nil, b.event)
	}
	if err == nil && len(frame) >= wire.HeaderLen {
		if got := wire.Flags(binary.BigEndian.Uint16(frame[6:])); got != b.flags {
			return nil, fmt.Errorf("the fields select flags %s, the vector says %s", got, b.flags)
		}
	}
	return frame, err
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
			return b, errors.New("base_offset must be set exactly when flags have 0x0020")
		}
		err = b.eventExtrasFromVector(v, len(payloads))
	}
	return b, err
}

func (b *binaryMsg) eventExtrasFromVector(v Vector, n int) error {
	e := &b.event
	if e.HasPublisher = b.flags&wire.FlagEventPublisher != 0; e.HasPublisher != (v.Publisher != nil) {
		return errors.New("publisher must be set exactly when flags have 0x2000")
	}
	if v.Publisher != nil {
		e.Publisher = []byte(*v.Publisher)
	}
	if (b.flags&wire.FlagEventTimestamps != 0) != (v.Timestamps != nil) || (v.Timestamps != nil && len(v.Timestamps) != n) {
		return errors.New("timestamps (one per payload) must be set exactly when flags have 0x4000")
	}
	e.Timestamps = v.Timestamps
	var err error
	e.Headers, err = headersOf(v, n, b.flags)
	return err
}

// headersOf encodes the vector's headers, one block per payload.
func headersOf(v Vector, n int, flags wire.Flags) ([][]byte, error) {
	if (flags&wire.FlagHeaders != 0) != (v.Headers != nil) || (v.Headers != nil && len(v.Headers) != n) {
		return nil, errors.New("headers (one list per payload) must be set exactly when flags have 0x0080")
	}
	if v.Headers == nil {
		return nil, nil
	}
	out := make([][]byte, n)
	for i, pairs := range v.Headers {
		hs := make([]wire.EventHeader, 0, len(pairs))
		for _, p := range pairs {
			hs = append(hs, wire.EventHeader{Key: p[0], Value: p[1]})
		}
		block, err := wire.AppendHeaders(nil, hs)
		if err != nil {
			return nil, fmt.Errorf("headers[%d]: %w", i, err)
		}
		out[i] = block
	}
	return out, nil
}

// headersToVector renders header blocks as vector pairs.
func headersToVector(blocks [][]byte) [][][2]string {
	if blocks == nil {
		return nil
	}
	out := make([][][2]string, len(blocks))
	for i, b := range blocks {
		hs, _ := wire.ParseHeaders(b)
		out[i] = [][2]string{}
		for _, h := range hs {
			out[i] = append(out[i], [2]string{h.Key, h.Value})
		}
	}
	return out
}

func (b *binaryMsg) batchFromVector(v Vector, payloads [][]byte) error {
	p := &b.batch
	p.TenantID, p.Namespace, p.Stream = derefStr(v.TenantID), derefStr(v.Namespace), derefStr(v.Stream)
	p.Payloads = payloads
	if v.Shard != nil {
		p.Shard, p.HasShard = *v.Shard, true
	}
	key, hasKey, err := keyOf(v)
	if err != nil {
		return err
	}
	p.Key, p.HasKey = key, hasKey
	if p.Headers, err = headersOf(v, len(payloads), b.flags); err != nil {
		return err
	}
	if b.kind == wire.KindPublishBatch {
		return nil
	}
	if (v.ProducerID != nil) != (v.Sequence != nil) {
		return errors.New("producer_id and sequence go together")
	}
	if v.ProducerID != nil {
		p.Idempotent, p.ProducerID, p.Sequence = true, *v.ProducerID, *v.Sequence
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
	if v.Code != nil {
		code, ok := wire.ParseErrorCode(*v.Code)
		if !ok || v.Retry == nil {
			return fmt.Errorf("code %q needs a known name and a retry class", *v.Code)
		}
		b.ack.Err = &wire.TypedError{Code: code, Retry: wire.ParseRetryClass(*v.Retry)}
	}
	if v.Reason != nil || v.RetryAfterMs != nil {
		if b.ack.Err == nil || v.Reason == nil || v.RetryAfterMs == nil {
			return errors.New("reason and retry_after_ms go together, with code")
		}
		b.ack.HasDetail, b.ack.Err.Reason, b.ack.Err.RetryAfterMs = true, *v.Reason, *v.RetryAfterMs
	}
	if v.OwnerNodeID != nil || v.OwnerAddr != nil || v.OwnerGeneration != nil {
		if v.OwnerNodeID == nil || v.OwnerAddr == nil || v.OwnerGeneration == nil {
			return errors.New("owner_node_id, owner_addr and owner_generation go together")
		}
		b.ack.HasOwner = true
		b.ack.Owner = wire.Owner{ID: *v.OwnerNodeID, Addr: *v.OwnerAddr, Generation: *v.OwnerGeneration}
	}
	if v.Offset != nil {
		b.ack.Offset, b.ack.HasOffset = *v.Offset, true
	}
	if v.Shard != nil {
		b.ack.Shard, b.ack.HasShard = *v.Shard, true
	}
	return nil
}

// keyOf returns the vector's routing key from key_utf8 or key_hex.
func keyOf(v Vector) ([]byte, bool, error) {
	switch {
	case v.KeyUTF8 != nil && v.KeyHex != nil:
		return nil, false, errors.New("both key_utf8 and key_hex")
	case v.KeyUTF8 != nil:
		return []byte(*v.KeyUTF8), true, nil
	case v.KeyHex != nil:
		b, err := ParseHex(*v.KeyHex)
		if err != nil {
			return nil, false, fmt.Errorf("key_hex: %w", err)
		}
		return b, true, nil
	}
	return nil, false, nil
}

// toVector renders the message as vector fields (no name, no hex).
func (b *binaryMsg) toVector() Vector {
	flags := uint16(b.flags)
	v := Vector{Kind: b.kind.String(), Flags: &flags}
	switch b.kind {
	case wire.KindAckedPublishBatch:
		v.RequestID = ptr(b.batch.RequestID)
		v.AckMode = ptr(b.batch.Mode.String())
		if b.batch.Idempotent {
			v.ProducerID, v.Sequence = ptr(b.batch.ProducerID), ptr(b.batch.Sequence)
		}
		fallthrough
	case wire.KindPublishBatch:
		v.TenantID, v.Namespace, v.Stream = ptr(b.batch.TenantID), ptr(b.batch.Namespace), ptr(b.batch.Stream)
		v.setPayloads(b.batch.Payloads)
		if b.batch.HasShard {
			v.Shard = ptr(b.batch.Shard)
		}
		if b.batch.HasKey {
			v.setKey(b.batch.Key)
		}
		v.Headers = headersToVector(b.batch.Headers)
	case wire.KindPublishAck:
		b.ackToVector(&v)
	default:
		if !b.event.Shared {
			v.SubscriptionID = ptr(b.event.SubscriptionID)
		}
		if b.event.HasBaseOffset {
			v.BaseOffset = ptr(b.event.BaseOffset)
		}
		if b.event.HasPublisher {
			v.Publisher = ptr(string(b.event.Publisher))
		}
		v.Timestamps = b.event.Timestamps
		v.Headers = headersToVector(b.event.Headers)
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

func (b *binaryMsg) ackToVector(v *Vector) {
	a := &b.ack
	v.Status = ptr(a.Status.String())
	v.RequestID = ptr(a.RequestID)
	if a.Message != "" {
		v.Message = ptr(a.Message)
	}
	if a.Err != nil {
		v.Code, v.Retry = ptr(a.Err.Code.String()), ptr(a.Err.Retry.String())
		if a.HasDetail {
			v.Reason, v.RetryAfterMs = ptr(a.Err.Reason), ptr(a.Err.RetryAfterMs)
		}
	}
	if a.HasOwner {
		v.OwnerNodeID, v.OwnerAddr, v.OwnerGeneration = ptr(a.Owner.ID), ptr(a.Owner.Addr), ptr(a.Owner.Generation)
	}
	if a.HasOffset {
		v.Offset = ptr(a.Offset)
	}
	if a.HasShard {
		v.Shard = ptr(a.Shard)
	}
}

// setKey renders a key as UTF-8 when it is valid, else as hex.
func (v *Vector) setKey(key []byte) {
	if utf8.Valid(key) {
		v.KeyUTF8 = ptr(string(key))
		return
	}
	v.KeyHex = ptr(hex.EncodeToString(key))
}
