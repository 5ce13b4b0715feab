package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// AckStatus is the first byte of a binary publish ack.
type AckStatus uint8

const (
	AckOK    AckStatus = 0
	AckError AckStatus = 1
)

func (s AckStatus) String() string {
	switch s {
	case AckOK:
		return "ok"
	case AckError:
		return "error"
	}
	return fmt.Sprintf("ack_status(%d)", uint8(s))
}

// PublishAck is a binary publish ack (layout 0x0010 and its modifiers), the
// broker's answer to an acked binary publish (JSON publishes, and
// idempotent ones, get JSON answers).
//
// Body order: u8 status, u64 request_id, u16 msg_len, msg, then as the
// flags say [u16 code, u8 retry] (0x0200), [u16 reason_len, reason, u64
// retry_after_ms] (0x0400), [owner block] (0x0080), [u64 offset] (0x1000),
// [u32 shard] (0x8000). The spec says msg_len is 0 for an ok ack; the
// encoder writes Message as given and the decoder accepts a message on
// either status, so a sender should leave Message empty for AckOK.
type PublishAck struct {
	Status    AckStatus
	RequestID uint64
	Message   string
	// Err is the typed error (FlagAckCode, when non-nil); with HasDetail
	// its reason and retry_after_ms follow (FlagAckDetail).
	Err       *TypedError
	HasDetail bool
	// Owner names the shard's owner (FlagAckOwner, HasOwner).
	Owner    Owner
	HasOwner bool
	// Offset is the offset of the batch's first record (FlagAckOffset,
	// HasOffset); only on a successful ack.
	Offset    uint64
	HasOffset bool
	// Shard is the shard the batch landed on (FlagShard, HasShard).
	Shard    uint32
	HasShard bool
}

// Flags are the header flags the ack's fields select.
func (a *PublishAck) Flags() Flags {
	f := FlagBinaryPublishAck
	if a.Err != nil {
		f |= FlagAckCode
		if a.HasDetail {
			f |= FlagAckDetail
		}
	}
	if a.HasOwner {
		f |= FlagAckOwner
	}
	if a.HasOffset {
		f |= FlagAckOffset
	}
	if a.HasShard {
		f |= FlagShard
	}
	return f
}

func (a *PublishAck) check() error {
	if a.Status != AckOK && a.Status != AckError {
		return &ValueError{Field: "status", Value: fmt.Sprint(uint8(a.Status)), Err: ErrBadAckStatus}
	}
	if len(a.Message) > math.MaxUint16 {
		return &LengthError{Field: "message", Len: len(a.Message), Max: math.MaxUint16, Err: ErrMessageTooLong}
	}
	if !utf8.ValidString(a.Message) {
		return &InvalidUTF8Error{Field: "message"}
	}
	if a.HasOffset && a.Status != AckOK {
		return errOffsetOnFailure
	}
	if a.Err != nil {
		if err := a.Err.check(); err != nil {
			return err
		}
	}
	if a.HasOwner {
		return a.Owner.check()
	}
	return nil
}

var errOffsetOnFailure = &ValueError{Field: "offset", Value: "on a failed ack", Err: ErrInvalidFlags}

// AppendPublishAckFrame appends a binary publish ack frame, its flags as its
// fields select. A status other than ok/error is ErrBadAckStatus; a message
// or reason over 65535 bytes is ErrMessageTooLong; an offset on a failed
// ack is ErrInvalidFlags; on error dst is returned unchanged.
func AppendPublishAckFrame(dst []byte, ack PublishAck) ([]byte, error) {
	if err := ack.check(); err != nil {
		return dst, err
	}
	dst, start := beginFrame(dst, ack.Flags())
	dst = append(dst, byte(ack.Status))
	dst = binary.BigEndian.AppendUint64(dst, ack.RequestID)
	dst = appendName(dst, ack.Message)
	if ack.Err != nil {
		dst = ack.Err.appendBinary(dst, ack.HasDetail)
	}
	if ack.HasOwner {
		dst = ack.Owner.appendBinary(dst)
	}
	if ack.HasOffset {
		dst = binary.BigEndian.AppendUint64(dst, ack.Offset)
	}
	if ack.HasShard {
		dst = binary.BigEndian.AppendUint32(dst, ack.Shard)
	}
	return endFrame(dst, start)
}

// DecodePublishAck decodes a plain 0x0010 payload into into.
func DecodePublishAck(payload []byte, into *PublishAck) error {
	return DecodePublishAckFlags(FlagBinaryPublishAck, payload, into)
}

// DecodePublishAckFlags decodes a publish ack whose header had flags. The
// message and reason are copied (they outlive the frame; ok acks carry
// none, so the common case does not allocate). into.Err is a fresh
// TypedError whenever the ack has one, so it may be kept.
func DecodePublishAckFlags(flags Flags, payload []byte, into *PublishAck) error {
	r := reader{b: payload}
	s, err := r.u8("status")
	if err != nil {
		return err
	}
	if st := AckStatus(s); st != AckOK && st != AckError {
		return &ValueError{Field: "status", Value: fmt.Sprint(s), Err: ErrBadAckStatus}
	}
	into.Status = AckStatus(s)
	if into.RequestID, err = r.u64("request_id"); err != nil {
		return err
	}
	if err := r.str("message", &into.Message); err != nil {
		return err
	}
	into.HasDetail = flags&FlagAckDetail != 0
	if flags&FlagAckCode != 0 {
		into.Err = &TypedError{}
		if err := into.Err.decodeBinary(&r, into.HasDetail); err != nil {
			return err
		}
	} else {
		into.Err = nil
	}
	if into.HasOwner = flags&FlagAckOwner != 0; into.HasOwner {
		if err := into.Owner.decode(&r); err != nil {
			return err
		}
	}
	if into.HasOffset = flags&FlagAckOffset != 0; into.HasOffset {
		if into.Status != AckOK {
			return errOffsetOnFailure
		}
		if into.Offset, err = r.u64("offset"); err != nil {
			return err
		}
	}
	if into.HasShard = flags&FlagShard != 0; into.HasShard {
		if into.Shard, err = r.u32("shard"); err != nil {
			return err
		}
	}
	return r.end()
}
