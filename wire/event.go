package wire

import (
	"encoding/binary"
	"slices"
	"strconv"
)

// EventBatch is a binary event batch, broker to subscriber. Two layouts:
//
//   - shared (0x0004, live delivery): no id; the event stream's
//     event_stream_hello already bound the stream to its subscription.
//   - legacy per-subscriber (0x0002, replay): starts with SubscriptionID.
//
// With HasBaseOffset (flag 0x0020, only for peers that advertised it)
// payload i has offset BaseOffset+i. Each modifier is sent only to a peer
// that offered it, so a batch without one is byte-identical to the frame
// from before it existed:
//
//   - HasPublisher (0x2000): the principal that published the events,
//     u8 len + bytes, after the offset.
//   - Timestamps (0x4000, when not nil): one u64 append time (Unix
//     microseconds) per event, before its length.
//   - Headers (0x0080, FlagHeaders, when not nil; Felix-Go): one header
//     block per event (eventheaders.go), after its time and before its length.
//
// Decoded payloads, header blocks and the publisher alias the frame buffer,
// as for PublishBatch.
type EventBatch struct {
	Shared         bool
	SubscriptionID uint64 // legacy layout only; ignored when Shared
	HasBaseOffset  bool
	BaseOffset     uint64
	HasPublisher   bool
	Publisher      []byte
	Timestamps     []uint64
	Headers        [][]byte
	Payloads       [][]byte
}

// MaxPublisherBytes bounds a publisher name in an event batch (u8 length).
const MaxPublisherBytes = 255

// Flags returns the header flags for this batch's layout.
func (e EventBatch) Flags() Flags {
	f := FlagBinaryEventBatch
	if e.Shared {
		f = FlagBinaryEventBatchShared
	}
	if e.HasBaseOffset {
		f |= FlagEventBatchOffsets
	}
	if e.HasPublisher {
		f |= FlagEventPublisher
	}
	if e.Timestamps != nil {
		f |= FlagEventTimestamps
	}
	if e.Headers != nil {
		f |= FlagHeaders
	}
	return f
}

func (e *EventBatch) check() error {
	if err := checkPayloads(e.Payloads); err != nil {
		return err
	}
	if len(e.Publisher) > MaxPublisherBytes {
		return &LengthError{Field: "publisher", Len: len(e.Publisher), Max: MaxPublisherBytes, Err: ErrNameTooLong}
	}
	if e.Timestamps != nil && len(e.Timestamps) != len(e.Payloads) {
		return &ValueError{Field: "timestamps", Value: strconv.Itoa(len(e.Timestamps)), Err: ErrInvalidFlags}
	}
	if e.Headers != nil {
		if len(e.Headers) != len(e.Payloads) {
			return &ValueError{Field: "headers", Value: strconv.Itoa(len(e.Headers)), Err: ErrInvalidFlags}
		}
		for _, h := range e.Headers {
			if n, err := HeaderBlockLen(h); err != nil || n != len(h) {
				return badHeaders("event header block of %d bytes does not parse", len(h))
			}
		}
	}
	return nil
}

// AppendEventBatchFrame appends an event batch frame in the layout e
// selects. On error (ErrTooManyPayloads, ErrPayloadTooLarge,
// ErrFrameTooLarge) dst is returned unchanged.
func AppendEventBatchFrame(dst []byte, e EventBatch) ([]byte, error) {
	if err := e.check(); err != nil {
		return dst, err
	}
	size := HeaderLen + 8 + 8 + 1 + len(e.Publisher) + 4 + 4*len(e.Payloads) + 8*len(e.Timestamps)
	for i, p := range e.Payloads {
		size += len(p)
		if e.Headers != nil {
			size += len(e.Headers[i])
		}
	}
	dst = slices.Grow(dst, size)
	dst, start := beginFrame(dst, e.Flags())
	if !e.Shared {
		dst = binary.BigEndian.AppendUint64(dst, e.SubscriptionID)
	}
	if e.HasBaseOffset {
		dst = binary.BigEndian.AppendUint64(dst, e.BaseOffset)
	}
	if e.HasPublisher {
		dst = append(dst, byte(len(e.Publisher)))
		dst = append(dst, e.Publisher...)
	}
	if e.Timestamps == nil && e.Headers == nil {
		return endFrame(appendPayloads(dst, e.Payloads), start)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Payloads)))
	for i, p := range e.Payloads {
		if e.Timestamps != nil {
			dst = binary.BigEndian.AppendUint64(dst, e.Timestamps[i])
		}
		if e.Headers != nil {
			dst = append(dst, e.Headers[i]...)
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
		dst = append(dst, p...)
	}
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
	into.SubscriptionID, into.BaseOffset, into.Publisher = 0, 0, nil
	into.HasBaseOffset = flags&FlagEventBatchOffsets != 0
	into.HasPublisher = flags&FlagEventPublisher != 0
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
	if into.HasPublisher {
		n, err := r.u8("publisher_len")
		if err != nil {
			return err
		}
		if into.Publisher, err = r.take("publisher", int(n)); err != nil {
			return err
		}
	}
	stamped, headed := flags&FlagEventTimestamps != 0, flags&FlagHeaders != 0
	if !stamped && !headed {
		into.Timestamps, into.Headers = nil, nil
		if into.Payloads, err = r.payloads(into.Payloads); err != nil {
			return err
		}
		return r.end()
	}
	if err := r.annotatedPayloads(into, stamped, headed); err != nil {
		return err
	}
	return r.end()
}

// annotatedPayloads reads `u32 count, count×([u64 ts] [header block] u32
// len, bytes)`. The count is bounded by what its smallest event takes
// before anything is allocated for it.
func (r *reader) annotatedPayloads(into *EventBatch, stamped, headed bool) error {
	count, err := r.u32("count")
	if err != nil {
		return err
	}
	per := 4
	if stamped {
		per += 8
	}
	if headed {
		per++
	}
	if uint64(count) > uint64(r.remaining()/per) {
		return &CountError{Count: count, Remaining: r.remaining()}
	}
	into.Payloads, into.Timestamps, into.Headers = into.Payloads[:0], nil, nil
	if stamped {
		into.Timestamps = make([]uint64, 0, count)
	}
	if headed {
		into.Headers = make([][]byte, 0, count)
	}
	for i := 0; i < int(count); i++ {
		if stamped {
			ts, err := r.u64(payloadField(i, " timestamp"))
			if err != nil {
				return err
			}
			into.Timestamps = append(into.Timestamps, ts)
		}
		if headed {
			h, err := r.headerBlock(payloadField(i, " headers"))
			if err != nil {
				return err
			}
			into.Headers = append(into.Headers, h)
		}
		p, err := r.onePayload(i)
		if err != nil {
			return err
		}
		into.Payloads = append(into.Payloads, p)
	}
	return nil
}

// onePayload reads `u32 len, bytes`, aliasing r.b.
func (r *reader) onePayload(i int) ([]byte, error) {
	n, err := r.u32(payloadField(i, " length"))
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(r.remaining()) {
		return nil, &TruncatedError{Field: payloadField(i, ""), Need: int(n), Have: r.remaining()}
	}
	return r.take(payloadField(i, ""), int(n))
}
