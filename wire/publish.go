package wire

import (
	"encoding/binary"
	"fmt"
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

// PublishBatch is a decoded binary publish batch (layout 0x0001).
//
// Payloads alias the frame buffer the batch was decoded from and are valid
// only as long as that buffer is neither reused nor modified; copy them to
// keep them. Decoding again into the same PublishBatch reuses the Payloads
// array and, when unchanged, the name strings, so steady-state decoding does
// not allocate.
type PublishBatch struct {
	TenantID  string
	Namespace string
	Stream    string
	Payloads  [][]byte
	// Shard is the shard a 0x0801/0x0809 publish is addressed to
	// (HasShard); v1 frames leave the choice to the broker.
	Shard    uint32
	HasShard bool
}

// AckedPublish is a decoded acked binary publish batch (layout 0x0009).
// Payload lifetimes are as for PublishBatch.
type AckedPublish struct {
	RequestID uint64
	Mode      AckMode // AckPerMessage or AckPerBatch
	PublishBatch
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

// AppendPublishBatchFrame appends an unacked binary publish frame (0x0001).
// It validates everything before writing; on error dst is returned
// unchanged.
func AppendPublishBatchFrame(dst []byte, tenant, ns, stream string, payloads [][]byte) ([]byte, error) {
	if err := checkPublishBody(tenant, ns, stream, payloads); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, HeaderLen+publishBodySize(tenant, ns, stream, payloads))
	dst, start := beginFrame(dst, FlagBinaryPublishBatch)
	dst = appendPublishBody(dst, tenant, ns, stream, payloads)
	return endFrame(dst, start)
}

// AppendAckedPublishFrame appends an acked binary publish frame (0x0009).
// mode must be AckPerMessage or AckPerBatch (ErrBadAckMode otherwise).
func AppendAckedPublishFrame(dst []byte, requestID uint64, mode AckMode, tenant, ns, stream string, payloads [][]byte) ([]byte, error) {
	if mode != AckPerMessage && mode != AckPerBatch {
		return dst, &ValueError{Field: "ack_mode", Value: mode.String(), Err: ErrBadAckMode}
	}
	if err := checkPublishBody(tenant, ns, stream, payloads); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, HeaderLen+9+publishBodySize(tenant, ns, stream, payloads))
	dst, start := beginFrame(dst, FlagBinaryPublishBatch|FlagBinaryPublishAcked)
	dst = binary.BigEndian.AppendUint64(dst, requestID)
	dst = append(dst, byte(mode))
	dst = appendPublishBody(dst, tenant, ns, stream, payloads)
	return endFrame(dst, start)
}

// DecodePublishBatch decodes a 0x0001 payload into into. See PublishBatch
// for the lifetime of the decoded payloads. On error into holds a partial
// decode and must not be used.
func DecodePublishBatch(payload []byte, into *PublishBatch) error {
	return DecodePublishBatchFlags(FlagBinaryPublishBatch, payload, into)
}

func decodePublishBody(r *reader, into *PublishBatch) error {
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
	var err error
	into.Payloads, err = r.payloads(into.Payloads)
	return err
}

// DecodeAckedPublish decodes a 0x0009 payload into into.
//
// The request_id / ack_mode prefix is decoded first and left in into even
// when the rest fails, so a broker can answer a malformed batch with a
// publish ack carrying the right request_id ("malformed publish batch").
// RequestID is valid whenever the payload held at least 8 bytes; Mode only
// when the error is not ErrBadAckMode.
func DecodeAckedPublish(payload []byte, into *AckedPublish) error {
	return DecodeAckedPublishFlags(FlagBinaryPublishBatch|FlagBinaryPublishAcked, payload, into)
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
	if mode := AckMode(m); mode != AckPerMessage && mode != AckPerBatch {
		into.Mode = AckNone
		return &ValueError{Field: "ack_mode", Value: fmt.Sprint(m), Err: ErrBadAckMode}
	}
	into.Mode = AckMode(m)
	return nil
}
