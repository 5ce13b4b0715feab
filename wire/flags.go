package wire

import "fmt"

// Flags is the u16 in the frame header that selects the payload layout. The
// same bit space is the frame-flag set exchanged at auth (client_flags,
// server_flags). The type is wider than the header so that one value can
// also carry the Felix-Go capability bits, which travel in their own auth
// field (capabilities.go) and occupy the high 16 bits here; they are never
// valid in a frame header.
type Flags uint32

// Frame flag bits, numbered as the published Felix numbers them. The v1
// bits are 0x0001-0x0020; 0x0040-0x1000 are the published 0.5/0.6
// additions this package implements; 0x8000 is a Felix-Go addition.
const (
	// FlagBinaryPublishBatch: binary publish batch, client to broker.
	FlagBinaryPublishBatch Flags = 0x0001
	// FlagBinaryEventBatch: legacy per-subscriber event batch with a u64
	// subscription_id; the broker sends it for replay only.
	FlagBinaryEventBatch Flags = 0x0002
	// FlagBinaryEventBatchShared: shared event batch without an id (the
	// event stream's hello binds it); the broker's live delivery form.
	FlagBinaryEventBatchShared Flags = 0x0004
	// FlagBinaryPublishAcked: modifier on FlagBinaryPublishBatch adding the
	// request_id + ack_mode prefix.
	FlagBinaryPublishAcked Flags = 0x0008
	// FlagBinaryPublishAck: binary publish ack, broker to client.
	FlagBinaryPublishAck Flags = 0x0010
	// FlagEventBatchOffsets: modifier on either event batch adding a u64
	// base_offset.
	FlagEventBatchOffsets Flags = 0x0020

	// FlagPublishKeyed: modifier on FlagBinaryPublishBatch adding the
	// routing key (u16 len, bytes) before the tenant. Sent only to a
	// broker that advertised it.
	FlagPublishKeyed Flags = 0x0040
	// FlagAckOwner: modifier on FlagBinaryPublishAck naming the shard's
	// owner (u16 node_id, u16 addr, u64 generation; owner.go). Sent only
	// to a client that offered it.
	FlagAckOwner Flags = 0x0080
	// FlagPublishIdempotent: modifier on an acked publish (it requires
	// FlagBinaryPublishAcked) adding u64 producer_id, u64 sequence after
	// the acked prefix. Answered in JSON (publish_ok / publish_refused /
	// publish_error), never with a binary ack.
	FlagPublishIdempotent Flags = 0x0100
	// FlagAckCode: modifier on a failed publish ack adding u16 code, u8
	// retry (errorcode.go).
	FlagAckCode Flags = 0x0200
	// FlagAckDetail: modifier on FlagAckCode adding u16 reason_len,
	// reason, u64 retry_after_ms (0 length or 0 ms: not said).
	FlagAckDetail Flags = 0x0400
	// FlagAckOffset: modifier on a successful publish ack adding the u64
	// offset of the batch's first record, always after the owner block.
	// Offered by a client, it also adds "offset" to JSON publish_ok.
	FlagAckOffset Flags = 0x1000
	// FlagEventPublisher: modifier on either event batch adding the
	// principal that published its events (u8 len, bytes) after the
	// offset fields. Sent only to a client that offered it.
	FlagEventPublisher Flags = 0x2000
	// FlagEventTimestamps: modifier on either event batch adding each
	// event's append time (u64 Unix microseconds) before its length. Sent
	// only to a client that offered it, on batches of durable streams.
	FlagEventTimestamps Flags = 0x4000
	// FlagShard (Felix-Go addition): on a publish, a u32 shard the batch
	// is addressed to (after the idempotent prefix; exclusive with
	// FlagPublishKeyed); on a publish ack, the u32 shard the batch landed
	// on, last. The published Felix stops at 0x4000 and refuses the bit.
	FlagShard Flags = 0x8000

	// FlagHeaders (Felix-Go addition) is bit 0x0080 on the frames where
	// the published Felix gives it no meaning: on a publish batch (0x0001)
	// and on either event batch (0x0002 / 0x0004) each payload is preceded
	// by its header block (eventheaders.go). On a publish ack the same bit is
	// FlagAckOwner. A peer sends it only to a peer that advertised
	// CapHeaders; the published Felix refuses it on these frames.
	FlagHeaders Flags = 0x0080

	// KnownFlags is every bit that may appear in a frame header. A frame
	// with any other bit is rejected (ErrUnknownFlags), never masked: a bit
	// we do not know may change the layout we would misread. The published
	// 0x0800 (skipped offsets) is an event-batch modifier this package
	// does not implement; it never offers it, so a conforming broker never
	// sends it.
	KnownFlags Flags = 0xF7FF

	// OriginalV1Flags is the frozen set a peer that never advertised
	// capabilities is assumed to support.
	OriginalV1Flags Flags = 0x0007

	// v1Flags is the wire v1 set (the published 0.4 KNOWN_FLAGS).
	v1Flags Flags = 0x003F

	// publishModifiers are the bits a publish frame may add to 0x0001.
	publishModifiers = FlagBinaryPublishAcked | FlagPublishIdempotent | FlagPublishKeyed | FlagShard | FlagHeaders
	// eventModifiers are the bits an event batch may add to 0x0002 or
	// 0x0004, in any combination.
	eventModifiers = FlagEventBatchOffsets | FlagEventPublisher | FlagEventTimestamps | FlagHeaders
	// ackModifiers are the bits a publish ack may add to 0x0010.
	ackModifiers = FlagAckOwner | FlagAckCode | FlagAckDetail | FlagAckOffset | FlagShard
)

// Kind is the payload layout a frame's flags select.
type Kind uint8

// Frame kinds. Modifiers do not make kinds of their own: they add fields
// that the kind's decoder reads as the flags say.
const (
	KindJSON              Kind = iota // flags 0
	KindPublishBatch                  // 0x0001 (+0x0040 or 0x8000, +0x0080)
	KindAckedPublishBatch             // 0x0009 (+0x0100, +0x0040 or 0x8000, +0x0080)
	KindPublishAck                    // 0x0010 (+0x0080, 0x0200, 0x0400, 0x1000, 0x8000)
	KindEventBatch                    // 0x0002 (+0x0020, 0x0080, 0x2000, 0x4000)
	KindEventBatchShared              // 0x0004 (+0x0020, 0x0080, 0x2000, 0x4000)
	numKinds
)

// kindNames are the names the test vectors use in their "kind" field.
var kindNames = [numKinds]string{
	KindJSON:              "json",
	KindPublishBatch:      "binary_publish_batch",
	KindAckedPublishBatch: "binary_acked_publish_batch",
	KindPublishAck:        "binary_publish_ack",
	KindEventBatch:        "binary_event_batch",
	KindEventBatchShared:  "binary_event_batch_shared",
}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, bool) {
	for k, name := range kindNames {
		if name == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// KindFromFlags maps header flags to a layout. Unknown bits give
// ErrUnknownFlags; known bits in a combination no layout uses give
// ErrInvalidFlags. The layouts: 0 (JSON); 0x0001 with at most one of
// 0x0040 / 0x8000, optionally 0x0080 (headers) and optionally 0x0008
// (acked) or 0x0108 (idempotent); 0x0010 with any of 0x0080, 0x0200,
// 0x1000, 0x8000 (0x0400 only with 0x0200); 0x0002 or 0x0004 with any of
// 0x0020, 0x0080, 0x2000, 0x4000.
func KindFromFlags(f Flags) (Kind, error) {
	if f&^KnownFlags != 0 {
		return 0, &FlagsError{Flags: f}
	}
	switch {
	case f == 0:
		return KindJSON, nil
	case f&FlagBinaryPublishBatch != 0:
		if f&^(FlagBinaryPublishBatch|publishModifiers) != 0 ||
			f&(FlagPublishKeyed|FlagShard) == FlagPublishKeyed|FlagShard ||
			f&(FlagPublishIdempotent|FlagBinaryPublishAcked) == FlagPublishIdempotent {
			break
		}
		if f&FlagBinaryPublishAcked != 0 {
			return KindAckedPublishBatch, nil
		}
		return KindPublishBatch, nil
	case f&FlagBinaryPublishAck != 0:
		if f&^(FlagBinaryPublishAck|ackModifiers) != 0 || f&(FlagAckDetail|FlagAckCode) == FlagAckDetail {
			break
		}
		return KindPublishAck, nil
	case f&^eventModifiers == FlagBinaryEventBatch:
		return KindEventBatch, nil
	case f&^eventModifiers == FlagBinaryEventBatchShared:
		return KindEventBatchShared, nil
	}
	return 0, &FlagsError{Flags: f}
}

// ValidLayout reports whether f selects a frame layout.
func ValidLayout(f Flags) bool {
	_, err := KindFromFlags(f)
	return err == nil
}

func (f Flags) String() string { return fmt.Sprintf("0x%04x", uint32(f)) }
