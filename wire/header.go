package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Frame header constants (spec 2.1).
const (
	// HeaderLen is the size of the frame header.
	HeaderLen = 12
	// Magic is "FLX1".
	Magic uint32 = 0x464C5831
	// Version is the only frame version; it is never negotiated.
	Version uint16 = 1
	// DefaultMaxFrameBytes is the payload cap the Rust broker and client
	// use. A maxFrame argument of 0 means this value.
	DefaultMaxFrameBytes = 16 << 20
)

// Header is a parsed frame header. Magic and version are implied: a Header
// only exists for a frame that had the right ones.
type Header struct {
	Flags  Flags
	Length uint32 // payload bytes after the header
}

// Kind returns the layout the header selects. It cannot fail for a Header
// returned without error by ParseHeader.
func (h Header) Kind() Kind {
	k, _ := KindFromFlags(h.Flags)
	return k
}

// ParseHeader validates the first HeaderLen bytes of b. Checks run in wire
// order: length of b, magic, version, payload length against maxFrame (0 =
// DefaultMaxFrameBytes; checked here so nothing is ever sized from an
// unchecked length), and last the flags.
//
// Flags are checked last on purpose: on ErrUnknownFlags and ErrInvalidFlags
// the returned Header is still filled in and its Length is within the cap,
// so a reader can skip the payload and keep the stream open, as the
// published broker does ("unsupported frame flags" and continue). Every other
// error leaves the stream unframed and is fatal to it.
func ParseHeader(b []byte, maxFrame uint32) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, &TruncatedError{Field: "header", Need: HeaderLen, Have: len(b)}
	}
	if m := binary.BigEndian.Uint32(b[0:4]); m != Magic {
		return Header{}, &ValueError{Field: "magic", Value: fmt.Sprintf("0x%08x", m), Err: ErrBadMagic}
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != Version {
		return Header{}, &ValueError{Field: "version", Value: fmt.Sprint(v), Err: ErrUnsupportedVersion}
	}
	h := Header{
		Flags:  Flags(binary.BigEndian.Uint16(b[6:8])),
		Length: binary.BigEndian.Uint32(b[8:12]),
	}
	if maxFrame == 0 {
		maxFrame = DefaultMaxFrameBytes
	}
	if h.Length > maxFrame {
		return Header{}, &FrameTooLargeError{Length: uint64(h.Length), Max: uint64(maxFrame)}
	}
	if _, err := KindFromFlags(h.Flags); err != nil {
		return h, err
	}
	return h, nil
}

// AppendHeader appends a 12-byte header. It does not validate flags: tests
// and tools need to build bad frames.
func AppendHeader(dst []byte, flags Flags, length uint32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, Magic)
	dst = binary.BigEndian.AppendUint16(dst, Version)
	dst = binary.BigEndian.AppendUint16(dst, uint16(flags))
	return binary.BigEndian.AppendUint32(dst, length)
}

// SplitFrame cuts the first whole frame off b, which must hold whole frames
// (a datagram, a test vector, a buffer a reader filled). payload and rest
// alias b.
//
// A payload shorter than the header's length is ErrTruncated. On
// ErrUnknownFlags / ErrInvalidFlags the header, payload and rest are
// returned along with the error so the caller can skip the frame and go on.
func SplitFrame(b []byte, maxFrame uint32) (h Header, payload, rest []byte, err error) {
	h, err = ParseHeader(b, maxFrame)
	if err != nil && !IsFlagsError(err) {
		return Header{}, nil, nil, err
	}
	body := b[HeaderLen:]
	if uint64(len(body)) < uint64(h.Length) {
		return Header{}, nil, nil, &TruncatedError{Field: "frame payload", Need: int(h.Length), Have: len(body)}
	}
	return h, body[:h.Length:h.Length], body[h.Length:], err
}

// IsFlagsError reports whether err is a *FlagsError (ParseHeader's unknown
// or invalid flags, after which the stream can go on). It is out of line
// so its errors.As target is only allocated on the error path: a reader
// that declared the target itself would allocate it for every frame.
func IsFlagsError(err error) bool {
	var fe *FlagsError
	return errors.As(err, &fe)
}

// beginFrame reserves a header whose length endFrame patches in, so bodies
// are appended once without measuring them first.
func beginFrame(dst []byte, flags Flags) ([]byte, int) {
	start := len(dst)
	return AppendHeader(dst, flags, 0), start
}

// endFrame patches the payload length of the frame begun at start. A body
// over 4 GiB cannot be framed; dst is cut back to start.
func endFrame(dst []byte, start int) ([]byte, error) {
	n := len(dst) - start - HeaderLen
	if uint64(n) > math.MaxUint32 {
		return dst[:start], &LengthError{Field: "frame payload", Len: n, Max: math.MaxUint32, Err: ErrFrameTooLarge}
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(n))
	return dst, nil
}
