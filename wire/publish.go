package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// AckMode says when and how a publish is acknowledged. The numeric values
// are the binary ack_mode byte; AckNone has no binary encoding (an unacked
// binary publish uses layout 0x0001 instead of 0x0009).
type AckMode uint8

const (
	AckNone       AckMode = 0
	AckPerMessage AckMode = 1
	AckPerBatch   AckMode = 2
)

var ackModeNames = [...]string{AckNone: "none", AckPerMessage: "per_message", AckPerBatch: "per_batch"}

// String returns the JSON spelling ("none", "per_message", "per_batch").
func (m AckMode) String() string {
	if int(m) < len(ackModeNames) {
		return ackModeNames[m]
	}
	return fmt.Sprintf("ack_mode(%d)", uint8(m))
}

// ParseAckMode is the inverse of AckMode.String for the three valid modes.
func ParseAckMode(s string) (AckMode, bool) {
	for m, name := range ackModeNames {
		if name == s {
			return AckMode(m), true
		}
	}
	return 0, false
}

// PublishBatch is a decoded binary publish batch (layout 0x0001 and its
// addressing modifiers).
//
// Payloads (and Key) alias the frame buffer the batch was decoded from and
// are valid only as long as that buffer is neither reused nor modified;
// copy them to keep them. Decoding again into the same PublishBatch reuses
// the Payloads array and, when unchanged, the name strings, so steady-state
// decoding does not allocate.
type PublishBatch struct {
	TenantID  string
	Namespace string
	Stream    string
	Payloads  [][]byte
	// Shard is the shard a FlagShard publish is addressed to (HasShard).
	Shard    uint32
	HasShard bool
	// Key is a FlagPublishKeyed publish's routing key (HasKey); the
	// broker hashes it to a shard (routing.go). An empty key is a key.
	Key    []byte
	HasKey bool
	// Headers (FlagHeaders, Felix-Go, when not nil) holds one header
	// block per payload (eventheaders.go), written before its length.
	Headers [][]byte
}

// AckedPublish is a decoded acked binary publish batch (layout 0x0009 and
// its modifiers). Payload lifetimes are as for PublishBatch.
type AckedPublish struct {
	RequestID uint64
	Mode      AckMode // AckPerMessage or AckPerBatch
	// Idempotent (FlagPublishIdempotent): the batch is sequence Sequence
	// of producer ProducerID on its shard. The ack mode byte is written as
	// per_batch and not checked on decode, as the published codec does.
	Idempotent bool
	ProducerID uint64
	Sequence   uint64
	PublishBatch
}

func (p *PublishBatch) flags() Flags {
	f := FlagBinaryPublishBatch
	if p.HasShard {
		f |= FlagShard
	}
	if p.HasKey {
		f |= FlagPublishKeyed
	}
	if p.Headers != nil {
		f |= FlagHeaders
	}
	return f
}

// Flags are the header flags the publish's fields select.
func (p *AckedPublish) Flags() Flags {
	f := p.PublishBatch.flags() | FlagBinaryPublishAcked
	if p.Idempotent {
		f |= FlagPublishIdempotent
	}
	return f
}

func (p *PublishBatch) check() error {
	if p.HasShard && p.HasKey {
		return &FlagsError{Flags: p.flags()}
	}
	if p.HasKey && len(p.Key) > math.MaxUint16 {
		return &LengthError{Field: "key", Len: len(p.Key), Max: math.MaxUint16, Err: ErrNameTooLong}
	}
	if p.Headers != nil {
		eb := EventBatch{Payloads: p.Payloads, Headers: p.Headers}
		if err := eb.check(); err != nil {
			return err
		}
	}
	return checkPublishBody(p.TenantID, p.Namespace, p.Stream, p.Payloads)
}

// headSize is the bytes the addressing fields take.
func (p *PublishBatch) headSize() int {
	n := 0
	if p.HasShard {
		n += 4
	}
	if p.HasKey {
		n += 2 + len(p.Key)
	}
	for _, h := range p.Headers {
		n += len(h)
	}
	return n + publishBodySize(p.TenantID, p.Namespace, p.Stream, p.Payloads)
}

// appendAddressed appends [u32 shard] [u16 key_len, key] and the body.
func (p *PublishBatch) appendAddressed(dst []byte) []byte {
	if p.HasShard {
		dst = binary.BigEndian.AppendUint32(dst, p.Shard)
	}
	if p.HasKey {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(p.Key)))
		dst = append(dst, p.Key...)
	}
	if p.Headers == nil {
		return appendPublishBody(dst, p.TenantID, p.Namespace, p.Stream, p.Payloads)
	}
	dst = appendName(dst, p.TenantID)
	dst = appendName(dst, p.Namespace)
	dst = appendName(dst, p.Stream)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(p.Payloads)))
	for i, pl := range p.Payloads {
		dst = append(dst, p.Headers[i]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(pl)))
		dst = append(dst, pl...)
	}
	return dst
}

// AppendPublish appends an unacked binary publish: 0x0001, keyed 0x0041 or
// shard-addressed 0x8001 as p says. It validates everything before writing;
// on error dst is returned unchanged.
func AppendPublish(dst []byte, p *PublishBatch) ([]byte, error) {
	if err := p.check(); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, HeaderLen+p.headSize())
	dst, start := beginFrame(dst, p.flags())
	return endFrame(p.appendAddressed(dst), start)
}

// AppendAckedPublish appends an acked binary publish: 0x0009 plus the
// idempotent (0x0100), keyed (0x0040) or shard (0x8000) modifiers p's
// fields select. Mode must be AckPerMessage or AckPerBatch (ErrBadAckMode
// otherwise) unless the publish is idempotent, which is always per_batch.
func AppendAckedPublish(dst []byte, p *AckedPublish) ([]byte, error) {
	mode := p.Mode
	if p.Idempotent {
		mode = AckPerBatch
	}
	if mode != AckPerMessage && mode != AckPerBatch {
		return dst, &ValueError{Field: "ack_mode", Value: mode.String(), Err: ErrBadAckMode}
	}
	if err := p.check(); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, HeaderLen+25+p.headSize())
	dst, start := beginFrame(dst, p.Flags())
	dst = binary.BigEndian.AppendUint64(dst, p.RequestID)
	dst = append(dst, byte(mode))
	if p.Idempotent {
		dst = binary.BigEndian.AppendUint64(dst, p.ProducerID)
		dst = binary.BigEndian.AppendUint64(dst, p.Sequence)
	}
	return endFrame(p.appendAddressed(dst), start)
}

func publishBodySize(tenant, ns, stream string, payloads [][]byte) int {
	n := 6 + len(tenant) + len(ns) + len(stream) + 4 + 4*len(payloads)
	for _, p := range payloads {
		n += len(p)
	}
	return n
}

func checkPublishBody(tenant, ns, stream string, payloads [][]byte) error {
	if err := checkName("tenant_id", tenant); err != nil {
		return err
	}
	if err := checkName("namespace", ns); err != nil {
		return err
	}
	if err := checkName("stream", stream); err != nil {
		return err
	}
	return checkPayloads(payloads)
}

func appendPublishBody(dst []byte, tenant, ns, stream string, payloads [][]byte) []byte {
	dst = appendName(dst, tenant)
	dst = appendName(dst, ns)
	dst = appendName(dst, stream)
	return appendPayloads(dst, payloads)
}

// AppendPublishBatchFrame appends an unacked v1 binary publish (0x0001).
func AppendPublishBatchFrame(dst []byte, tenant, ns, stream string, payloads [][]byte) ([]byte, error) {
	return AppendPublish(dst, &PublishBatch{TenantID: tenant, Namespace: ns, Stream: stream, Payloads: payloads})
}

// AppendAckedPublishFrame appends an acked v1 binary publish (0x0009).
// mode must be AckPerMessage or AckPerBatch (ErrBadAckMode otherwise).
func AppendAckedPublishFrame(dst []byte, requestID uint64, mode AckMode, tenant, ns, stream string, payloads [][]byte) ([]byte, error) {
	return AppendAckedPublish(dst, &AckedPublish{RequestID: requestID, Mode: mode,
		PublishBatch: PublishBatch{TenantID: tenant, Namespace: ns, Stream: stream, Payloads: payloads}})
}

// DecodePublishBatch decodes a 0x0001 payload into into. See PublishBatch
// for the lifetime of the decoded payloads. On error into holds a partial
// decode and must not be used.
func DecodePublishBatch(payload []byte, into *PublishBatch) error {
	return DecodePublishBatchFlags(FlagBinaryPublishBatch, payload, into)
}

// DecodePublishBatchFlags decodes an unacked publish whose header had
// flags (0x0001, 0x0041 or 0x8001).
func DecodePublishBatchFlags(flags Flags, payload []byte, into *PublishBatch) error {
	r := reader{b: payload}
	if err := decodeAddressed(&r, flags, into); err != nil {
		return err
	}
	return r.end()
}

// DecodeAckedPublish decodes a 0x0009 payload into into.
func DecodeAckedPublish(payload []byte, into *AckedPublish) error {
	return DecodeAckedPublishFlags(FlagBinaryPublishBatch|FlagBinaryPublishAcked, payload, into)
}

// DecodeAckedPublishFlags decodes an acked publish whose header had flags.
//
// The request_id / ack_mode prefix is decoded first and left in into even
// when the rest fails, so a broker can answer a malformed batch with the
// right request_id ("malformed publish batch"). RequestID is valid whenever
// the payload held at least 8 bytes; Mode only when the error is not
// ErrBadAckMode.
func DecodeAckedPublishFlags(flags Flags, payload []byte, into *AckedPublish) error {
	r := reader{b: payload}
	into.Idempotent = flags&FlagPublishIdempotent != 0
	if err := decodeAckedPrefix(&r, into); err != nil {
		return err
	}
	if into.Idempotent {
		var err error
		if into.ProducerID, err = r.u64("producer_id"); err != nil {
			return err
		}
		if into.Sequence, err = r.u64("sequence"); err != nil {
			return err
		}
	}
	if err := decodeAddressed(&r, flags, &into.PublishBatch); err != nil {
		return err
	}
	return r.end()
}

// decodeAddressed reads [u32 shard] [u16 key_len, key] and the body.
func decodeAddressed(r *reader, flags Flags, into *PublishBatch) error {
	into.Shard, into.HasShard = 0, flags&FlagShard != 0
	into.Key, into.HasKey = nil, flags&FlagPublishKeyed != 0
	var err error
	if into.HasShard {
		if into.Shard, err = r.u32("shard"); err != nil {
			into.Payloads = into.Payloads[:0]
			return err
		}
	}
	if into.HasKey {
		n, err := r.u16("key")
		if err == nil {
			into.Key, err = r.take("key", int(n))
		}
		if err != nil {
			into.Payloads = into.Payloads[:0]
			return err
		}
	}
	return decodePublishBody(r, into, flags&FlagHeaders != 0)
}

func decodePublishBody(r *reader, into *PublishBatch, headed bool) error {
	if err := r.str("tenant_id", &into.TenantID); err != nil {
		into.Payloads = into.Payloads[:0]
		return err
	}
	if err := r.str("namespace", &into.Namespace); err != nil {
		into.Payloads = into.Payloads[:0]
		return err
	}
	if err := r.str("stream", &into.Stream); err != nil {
		into.Payloads = into.Payloads[:0]
		return err
	}
	into.Headers = nil
	if headed {
		var eb EventBatch
		eb.Payloads = into.Payloads
		err := r.annotatedPayloads(&eb, false, true)
		into.Payloads, into.Headers = eb.Payloads, eb.Headers
		return err
	}
	var err error
	into.Payloads, err = r.payloads(into.Payloads)
	return err
}

func decodeAckedPrefix(r *reader, into *AckedPublish) error {
	id, err := r.u64("request_id")
	if err != nil {
		return err
	}
	into.RequestID = id
	m, err := r.u8("ack_mode")
	if err != nil {
		return err
	}
	if into.Idempotent {
		into.Mode = AckPerBatch
		return nil
	}
	if mode := AckMode(m); mode != AckPerMessage && mode != AckPerBatch {
		into.Mode = AckNone
		return &ValueError{Field: "ack_mode", Value: fmt.Sprint(m), Err: ErrBadAckMode}
	}
	into.Mode = AckMode(m)
	return nil
}
