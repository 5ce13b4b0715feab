package wire

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// reader walks a binary body. Every read checks the bytes left first, so a
// hostile length can only ever produce an error, never a panic or an
// allocation sized by the attacker.
type reader struct {
	b   []byte
	off int
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) take(field string, n int) ([]byte, error) {
	if n > r.remaining() {
		return nil, &TruncatedError{Field: field, Need: n, Have: r.remaining()}
	}
	s := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return s, nil
}

func (r *reader) u8(field string) (byte, error) {
	s, err := r.take(field, 1)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

func (r *reader) u16(field string) (uint16, error) {
	s, err := r.take(field, 2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(s), nil
}

func (r *reader) u32(field string) (uint32, error) {
	s, err := r.take(field, 4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(s), nil
}

func (r *reader) u64(field string) (uint64, error) {
	s, err := r.take(field, 8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(s), nil
}

// str reads a u16-length-prefixed UTF-8 string into *dst, reusing the
// existing string when the bytes are equal: the comparison does not
// allocate, so a steady stream of frames for one stream decodes its names
// for free.
func (r *reader) str(field string, dst *string) error {
	n, err := r.u16(field) // no concatenation: it would allocate per call
	if err != nil {
		return err
	}
	b, err := r.take(field, int(n))
	if err != nil {
		return err
	}
	if !utf8.Valid(b) {
		return &InvalidUTF8Error{Field: field}
	}
	if string(b) != *dst {
		*dst = string(b)
	}
	return nil
}

// payloads reads `u32 count, count×(u32 len, bytes)` into dst[:0]. The
// count is bounded by remaining/4 before dst is grown, so the slice of
// headers is at most 6 bytes per frame byte. Payloads alias r.b and are
// capped at their own length so appending to one cannot overwrite the next.
func (r *reader) payloads(dst [][]byte) ([][]byte, error) {
	dst = dst[:0]
	count, err := r.u32("count")
	if err != nil {
		return dst, err
	}
	if uint64(count) > uint64(r.remaining()/4) {
		return dst, &CountError{Count: count, Remaining: r.remaining()}
	}
	if cap(dst) < int(count) {
		dst = make([][]byte, 0, count)
	}
	for i := 0; i < int(count); i++ {
		if r.remaining() < 4 {
			return dst, &TruncatedError{Field: payloadField(i, " length"), Need: 4, Have: r.remaining()}
		}
		n := binary.BigEndian.Uint32(r.b[r.off:])
		r.off += 4
		if uint64(n) > uint64(r.remaining()) {
			return dst, &TruncatedError{Field: payloadField(i, ""), Need: int(n), Have: r.remaining()}
		}
		end := r.off + int(n)
		dst = append(dst, r.b[r.off:end:end])
		r.off = end
	}
	return dst, nil
}

func payloadField(i int, suffix string) string {
	return "payload[" + strconv.Itoa(i) + "]" + suffix
}

// end rejects bytes after the body: a frame's length says exactly where the
// body stops, and slack there means the peer and we disagree on the layout.
func (r *reader) end() error {
	if n := r.remaining(); n != 0 {
		return &TrailingBytesError{N: n}
	}
	return nil
}

// checkName validates a name before any byte of the frame is written.
func checkName(field, s string) error {
	if len(s) > math.MaxUint16 {
		return &LengthError{Field: field, Len: len(s), Max: math.MaxUint16, Err: ErrNameTooLong}
	}
	if !utf8.ValidString(s) {
		return &InvalidUTF8Error{Field: field}
	}
	return nil
}

func appendName(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// checkPayloads validates counts and lengths against the u32 prefixes.
func checkPayloads(payloads [][]byte) error {
	if uint64(len(payloads)) > math.MaxUint32 {
		return &LengthError{Field: "payloads", Len: len(payloads), Max: math.MaxUint32, Err: ErrTooManyPayloads}
	}
	for i, p := range payloads {
		if uint64(len(p)) > math.MaxUint32 {
			return &LengthError{Field: payloadField(i, ""), Len: len(p), Max: math.MaxUint32, Err: ErrPayloadTooLarge}
		}
	}
	return nil
}

func appendPayloads(dst []byte, payloads [][]byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payloads)))
	for _, p := range payloads {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
		dst = append(dst, p...)
	}
	return dst
}
