package wire

import (
	"encoding/binary"
	"slices"
)

// EventBatch is a binary event batch, broker to subscriber. Two layouts:
//
//   - shared (0x0004, live delivery): no id; the event stream's
//     event_stream_hello already bound the stream to its subscription.
//   - legacy per-subscriber (0x0002, replay): starts with SubscriptionID.
//
// With HasBaseOffset (flag 0x0020, only for peers that advertised it)
// payload i has offset BaseOffset+i.
//
// Decoded payloads alias the frame buffer, as for PublishBatch.
type EventBatch struct {
	Shared         bool
	SubscriptionID uint64 // legacy layout only; ignored when Shared
	HasBaseOffset  bool
	BaseOffset     uint64
	Payloads       [][]byte
}

// Flags returns the header flags for this batch's layout.
func (e EventBatch) Flags() Flags {
	f := FlagBinaryEventBatch
	if e.Shared {
		f = FlagBinaryEventBatchShared
	}
	if e.HasBaseOffset {
		f |= FlagEventBatchOffsets
	}
	return f
}

// AppendEventBatchFrame appends an event batch frame in the layout e
// selects. On error (ErrTooManyPayloads, ErrPayloadTooLarge,
// ErrFrameTooLarge) dst is returned unchanged.
func AppendEventBatchFrame(dst []byte, e EventBatch) ([]byte, error) {
	if err := checkPayloads(e.Payloads); err != nil {
		return dst, err
	}
	size := HeaderLen + 8 + 8 + 4 + 4*len(e.Payloads)
	for _, p := range e.Payloads {
		size += len(p)
	}
	dst = slices.Grow(dst, size)
	dst, start := beginFrame(dst, e.Flags())
	if !e.Shared {
		dst = binary.BigEndian.AppendUint64(dst, e.SubscriptionID)
	}
	if e.HasBaseOffset {
		dst = binary.BigEndian.AppendUint64(dst, e.BaseOffset)
	}
	dst = appendPayloads(dst, e.Payloads)
	return endFrame(dst, start)
}

// DecodeEventBatch decodes an event batch payload whose header carried
// flags (0x0002, 0x0022, 0x0004 or 0x0024; anything else is
// ErrUnknownFlags or ErrInvalidFlags). Shared, HasBaseOffset and the unused
// id/offset fields are all reset, so into never mixes two frames.
func DecodeEventBatch(flags Flags, payload []byte, into *EventBatch) error {
	k, err := KindFromFlags(flags)
	if err != nil {
		return err
	}
	if k != KindEventBatch && k != KindEventBatchShared {
		return &ValueError{Field: "event batch flags", Value: flags.String(), Err: ErrInvalidFlags}
	}
	r := reader{b: payload}
	into.Shared = k == KindEventBatchShared
	into.SubscriptionID, into.BaseOffset = 0, 0
	into.HasBaseOffset = flags&FlagEventBatchOffsets != 0
	if !into.Shared {
		if into.SubscriptionID, err = r.u64("subscription_id"); err != nil {
			return err
		}
	}
	if into.HasBaseOffset {
		if into.BaseOffset, err = r.u64("base_offset"); err != nil {
			return err
		}
	}
	if into.Payloads, err = r.payloads(into.Payloads); err != nil {
		return err
	}
	return r.end()
}
