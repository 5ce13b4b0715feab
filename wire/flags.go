package wire

import "fmt"

// Flags is the u16 in the frame header that selects the payload layout. The
// same bit space doubles as the capability set exchanged at auth (see
// capabilities.go).
type Flags uint16

// Frame flag bits (spec 2.1).
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

	// KnownFlags is every bit that may appear in a frame header. A frame
	// with any other bit is rejected (ErrUnknownFlags), never masked: a bit
	// we do not know may change the layout we would misread.
	KnownFlags Flags = 0x003F

	// OriginalV1Flags is the frozen set a peer that never advertised
	// capabilities is assumed to support.
	OriginalV1Flags Flags = 0x0007

	// FlagAckOwner (Felix-Go addition, cluster mode): modifier on
	// FlagBinaryPublishAck appending the owner of the publish's shard
	// (owner.go). Sent only to peers that advertised it.
	FlagAckOwner Flags = 0x0400
	// FlagPublishShard (Felix-Go addition, cluster mode): modifier on
	// FlagBinaryPublishBatch (with or without FlagBinaryPublishAcked)
	// prefixing the publish body with the u32 shard it is addressed to.
	// Sent only to peers that advertised it.
	FlagPublishShard Flags = 0x0800

	// layoutFlags is every bit some frame layout uses: the v1 bits plus
	// the two cluster modifiers. KnownFlags stays the v1 set the Rust
	// client advertises.
	layoutFlags = KnownFlags | FlagAckOwner | FlagPublishShard
)

// Kind is the payload layout a frame's flags select.
type Kind uint8

// Frame kinds. The offsets modifier does not make a kind of its own: it
// changes one field of an event batch (EventBatch.HasBaseOffset).
const (
	KindJSON              Kind = iota // flags 0
	KindPublishBatch                  // 0x0001
	KindAckedPublishBatch             // 0x0009
	KindPublishAck                    // 0x0010
	KindEventBatch                    // 0x0002, 0x0022
	KindEventBatchShared              // 0x0004, 0x0024
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
// ErrUnknownFlags; known bits in a combination that is not one of the eight
// v1 layouts (0, 0x01, 0x09, 0x10, 0x02, 0x22, 0x04, 0x24) or the three
// cluster variants (0x0801, 0x0809, 0x0410) give ErrInvalidFlags.
func KindFromFlags(f Flags) (Kind, error) {
	switch f {
	case 0:
		return KindJSON, nil
	case FlagBinaryPublishBatch, FlagBinaryPublishBatch | FlagPublishShard:
		return KindPublishBatch, nil
	case FlagBinaryPublishBatch | FlagBinaryPublishAcked, FlagBinaryPublishBatch | FlagBinaryPublishAcked | FlagPublishShard:
		return KindAckedPublishBatch, nil
	case FlagBinaryPublishAck, FlagBinaryPublishAck | FlagAckOwner:
		return KindPublishAck, nil
	case FlagBinaryEventBatch, FlagBinaryEventBatch | FlagEventBatchOffsets:
		return KindEventBatch, nil
	case FlagBinaryEventBatchShared, FlagBinaryEventBatchShared | FlagEventBatchOffsets:
		return KindEventBatchShared, nil
	}
	return 0, &FlagsError{Flags: f}
}

// ValidLayout reports whether f selects a frame layout.
func ValidLayout(f Flags) bool {
	_, err := KindFromFlags(f)
	return err == nil
}

func (f Flags) String() string { return fmt.Sprintf("0x%04x", uint16(f)) }
