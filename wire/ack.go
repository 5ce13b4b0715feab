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

// PublishAck is a binary publish ack (layout 0x0010), the broker's answer to
// an acked binary publish (JSON publishes get JSON publish_ok/publish_error).
//
// The spec says msg_len is 0 for an ok ack; the encoder writes Message as
// given and the decoder accepts a message on either status, so a sender
// should leave Message empty for AckOK.
type PublishAck struct {
	Status    AckStatus
	RequestID uint64
	Message   string
	// Owner names the shard's owner (flags 0x0410, HasOwner): appended
	// after the message as u32 shard, u16 id_len, id, u16 addr_len, addr.
	Owner    Owner
	HasOwner bool
}

// AppendPublishAckFrame appends a binary publish ack frame. A status other
// than ok/error is ErrBadAckStatus; a message over 65535 bytes is
// ErrMessageTooLong; on error dst is returned unchanged.
func AppendPublishAckFrame(dst []byte, ack PublishAck) ([]byte, error) {
	if ack.Status != AckOK && ack.Status != AckError {
		return dst, &ValueError{Field: "status", Value: fmt.Sprint(uint8(ack.Status)), Err: ErrBadAckStatus}
	}
	if len(ack.Message) > math.MaxUint16 {
		return dst, &LengthError{Field: "message", Len: len(ack.Message), Max: math.MaxUint16, Err: ErrMessageTooLong}
	}
	if !utf8.ValidString(ack.Message) {
		return dst, &InvalidUTF8Error{Field: "message"}
	}
	if !ack.HasOwner {
		dst = AppendHeader(dst, FlagBinaryPublishAck, uint32(11+len(ack.Message)))
		dst = append(dst, byte(ack.Status))
		dst = binary.BigEndian.AppendUint64(dst, ack.RequestID)
		return appendName(dst, ack.Message), nil
	}
	if err := ack.Owner.check(); err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, FlagBinaryPublishAck|FlagAckOwner, uint32(11+len(ack.Message)+ack.Owner.size()))
	dst = append(dst, byte(ack.Status))
	dst = binary.BigEndian.AppendUint64(dst, ack.RequestID)
	dst = appendName(dst, ack.Message)
	return ack.Owner.appendBinary(dst), nil
}

// DecodePublishAck decodes a 0x0010 payload into into. The message is
// copied (it outlives the frame; ok acks carry none, so the common case does
// not allocate).
func DecodePublishAck(payload []byte, into *PublishAck) error {
	return DecodePublishAckFlags(FlagBinaryPublishAck, payload, into)
}

// DecodePublishAckFlags decodes a 0x0010 or 0x0410 (owner-naming) ack as
// flags says; into.HasOwner tells which.
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
	into.HasOwner = flags&FlagAckOwner != 0
	if into.HasOwner {
		if err := into.Owner.decode(&r); err != nil {
			return err
		}
	}
	return r.end()
}
