package wire

import (
	"errors"
	"fmt"
)

// Sentinels. Every error a decoder returns satisfies errors.Is with exactly
// one of these categories (ErrShortHeader is also an ErrTruncated); the typed
// errors below carry the context (field, offsets, the offending value).
var (
	// Header.
	ErrShortHeader        = errors.New("wire: short header")
	ErrBadMagic           = errors.New("wire: bad magic")
	ErrUnsupportedVersion = errors.New("wire: unsupported version")
	ErrUnknownFlags       = errors.New("wire: unknown frame flags")
	ErrInvalidFlags       = errors.New("wire: invalid frame flags combination")
	ErrFrameTooLarge      = errors.New("wire: frame too large")

	// Binary bodies.
	ErrTruncated     = errors.New("wire: truncated")
	ErrCountTooLarge = errors.New("wire: count exceeds remaining bytes")
	ErrTrailingBytes = errors.New("wire: trailing bytes after body")
	ErrInvalidUTF8   = errors.New("wire: invalid UTF-8")
	ErrBadAckMode    = errors.New("wire: bad ack mode")
	ErrBadAckStatus  = errors.New("wire: bad ack status")

	// JSON messages.
	ErrUnknownMessageType = errors.New("wire: unknown message type")
	ErrMissingField       = errors.New("wire: missing field")
	ErrMalformedJSON      = errors.New("wire: malformed JSON")

	// Encoders: the value cannot be represented in the v1 layout.
	ErrNameTooLong     = errors.New("wire: name longer than 65535 bytes")
	ErrMessageTooLong  = errors.New("wire: message longer than 65535 bytes")
	ErrTooManyPayloads = errors.New("wire: too many payloads")
	ErrPayloadTooLarge = errors.New("wire: payload longer than 4 GiB")
)

// TruncatedError reports a length or field that runs past the end of the
// buffer. Field "header" also matches ErrShortHeader.
type TruncatedError struct {
	Field string // what was being read, e.g. "stream", "payload[3]"
	Need  int    // bytes the field needs
	Have  int    // bytes that remained
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("wire: truncated %s: need %d bytes, have %d", e.Field, e.Need, e.Have)
}

// Is maps to ErrTruncated, and to ErrShortHeader for the 12-byte header.
func (e *TruncatedError) Is(target error) bool {
	return target == ErrTruncated || (target == ErrShortHeader && e.Field == "header")
}

// CountError reports a payload count that cannot fit in the bytes left: each
// payload needs at least its 4-byte length, so count > remaining/4 is a lie
// and is rejected before anything is allocated for it.
type CountError struct {
	Count     uint32
	Remaining int
}

func (e *CountError) Error() string {
	return fmt.Sprintf("wire: count %d cannot fit in %d remaining bytes", e.Count, e.Remaining)
}

func (e *CountError) Is(target error) bool { return target == ErrCountTooLarge }

// FrameTooLargeError reports a frame whose payload length exceeds the cap.
type FrameTooLargeError struct {
	Length uint64
	Max    uint64
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("wire: frame payload %d bytes exceeds cap %d", e.Length, e.Max)
}

func (e *FrameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

// FlagsError reports flags that are not a frame layout: unknown bits
// (ErrUnknownFlags) or known bits in a combination no layout uses
// (ErrInvalidFlags).
type FlagsError struct {
	Flags Flags
}

func (e *FlagsError) Error() string {
	if e.Flags&^KnownFlags != 0 {
		return fmt.Sprintf("wire: unknown frame flags 0x%04x in 0x%04x", uint32(e.Flags&^KnownFlags), uint32(e.Flags))
	}
	return fmt.Sprintf("wire: frame flags 0x%04x are not a valid layout", uint32(e.Flags))
}

func (e *FlagsError) Is(target error) bool {
	if e.Flags&^KnownFlags != 0 {
		return target == ErrUnknownFlags
	}
	return target == ErrInvalidFlags
}

// ValueError reports a field holding a value outside its domain: the magic,
// the version, an ack mode or status byte, a JSON enum string. Err is the
// category sentinel.
type ValueError struct {
	Field string
	Value string
	Err   error
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("%v: %s = %s", e.Err, e.Field, e.Value)
}

func (e *ValueError) Is(target error) bool { return target == e.Err }

// TrailingBytesError reports bytes left over after a complete binary body.
type TrailingBytesError struct {
	N int
}

func (e *TrailingBytesError) Error() string {
	return fmt.Sprintf("wire: %d trailing bytes after body", e.N)
}

func (e *TrailingBytesError) Is(target error) bool { return target == ErrTrailingBytes }

// InvalidUTF8Error reports a name or message that is not valid UTF-8.
type InvalidUTF8Error struct {
	Field string
}

func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("wire: invalid UTF-8 in %s", e.Field)
}

func (e *InvalidUTF8Error) Is(target error) bool { return target == ErrInvalidUTF8 }

// UnknownMessageTypeError reports a JSON "type" this package does not know.
type UnknownMessageTypeError struct {
	Type string
}

func (e *UnknownMessageTypeError) Error() string {
	return fmt.Sprintf("wire: unknown message type %q", e.Type)
}

func (e *UnknownMessageTypeError) Is(target error) bool { return target == ErrUnknownMessageType }

// MissingFieldError reports a required JSON field that is absent or null.
type MissingFieldError struct {
	Type  string
	Field string
}

func (e *MissingFieldError) Error() string {
	return fmt.Sprintf("wire: %s: missing field %q", e.Type, e.Field)
}

func (e *MissingFieldError) Is(target error) bool { return target == ErrMissingField }

// MalformedJSONError reports JSON that does not parse, a field of the wrong
// JSON type or range, or a binary field that is not canonical padded base64.
type MalformedJSONError struct {
	Field string // empty when the document itself is broken
	Err   error  // the underlying parser error, if any
}

func (e *MalformedJSONError) Error() string {
	switch {
	case e.Field == "":
		return fmt.Sprintf("wire: malformed JSON: %v", e.Err)
	case e.Err == nil:
		return fmt.Sprintf("wire: malformed JSON field %q", e.Field)
	}
	return fmt.Sprintf("wire: malformed JSON field %q: %v", e.Field, e.Err)
}

func (e *MalformedJSONError) Is(target error) bool { return target == ErrMalformedJSON }

func (e *MalformedJSONError) Unwrap() error { return e.Err }

// LengthError reports a value an encoder cannot represent in its length
// prefix. Err is ErrNameTooLong, ErrMessageTooLong, ErrTooManyPayloads,
// ErrPayloadTooLarge or ErrFrameTooLarge.
type LengthError struct {
	Field string
	Len   int
	Max   int
	Err   error
}

func (e *LengthError) Error() string {
	return fmt.Sprintf("%v: %s has %d, max %d", e.Err, e.Field, e.Len, e.Max)
}

func (e *LengthError) Is(target error) bool { return target == e.Err }
