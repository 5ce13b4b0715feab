package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Event headers (Felix-Go addition, capability CapHeaders): a small,
// bounded, ordered set of string key/value pairs carried with one event, a
// trace context ("traceparent") or a content type. The published Felix has
// none. One encoding, the header block, serves every place they travel:
// publish and event batch frames with FlagHeaders, and the log record
// (docs/storage-format.md), so a block is validated once on the way in and
// copied byte for byte after that.
//
// Header block, big-endian:
//
//	u8 count (0..MaxHeaders)
//	count × (u8 key_len (1..255), key, u16 value_len (0..MaxHeaderValueBytes), value)
//
// Keys and values are UTF-8; keys are unique within a block; a whole block
// is at most MaxHeaderBlockBytes. A payload without headers in a frame with
// FlagHeaders has the one-byte block 0x00.

// EventHeader is one event header.
type EventHeader struct {
	Key   string
	Value string
}

// Header bounds.
const (
	MaxHeaders          = 32
	MaxHeaderKeyBytes   = 255
	MaxHeaderValueBytes = 4096
	MaxHeaderBlockBytes = 16 << 10
)

// ErrBadHeaders: a header block or header set outside its bounds or
// layout.
var ErrBadHeaders = errors.New("wire: bad headers")

// HeadersError says what is wrong with a header set or block.
type HeadersError struct{ Reason string }

func (e *HeadersError) Error() string { return "wire: bad headers: " + e.Reason }

// Is maps to ErrBadHeaders.
func (e *HeadersError) Is(target error) bool { return target == ErrBadHeaders }

func badHeaders(format string, args ...any) error {
	return &HeadersError{Reason: fmt.Sprintf(format, args...)}
}

// CheckHeaders validates hs against the bounds, before anything is
// written.
func CheckHeaders(hs []EventHeader) error {
	if len(hs) > MaxHeaders {
		return badHeaders("%d headers, at most %d", len(hs), MaxHeaders)
	}
	size := 1
	for i, h := range hs {
		if err := checkHeader(h.Key, h.Value); err != nil {
			return err
		}
		for _, o := range hs[:i] {
			if o.Key == h.Key {
				return badHeaders("key %q appears twice", h.Key)
			}
		}
		size += 3 + len(h.Key) + len(h.Value)
	}
	if size > MaxHeaderBlockBytes {
		return badHeaders("%d bytes encoded, at most %d", size, MaxHeaderBlockBytes)
	}
	return nil
}

func checkHeader(k, v string) error {
	switch {
	case len(k) == 0 || len(k) > MaxHeaderKeyBytes:
		return badHeaders("key of %d bytes, want 1 to %d", len(k), MaxHeaderKeyBytes)
	case len(v) > MaxHeaderValueBytes:
		return badHeaders("value of %q has %d bytes, at most %d", k, len(v), MaxHeaderValueBytes)
	case !utf8.ValidString(k) || !utf8.ValidString(v):
		return badHeaders("key or value of %q is not UTF-8", k)
	}
	return nil
}

// AppendHeaders appends the header block of hs (0x00 for none). On error
// dst is returned unchanged.
func AppendHeaders(dst []byte, hs []EventHeader) ([]byte, error) {
	if err := CheckHeaders(hs); err != nil {
		return dst, err
	}
	dst = append(dst, byte(len(hs)))
	for _, h := range hs {
		dst = append(dst, byte(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	return dst, nil
}

// HeaderBlockLen validates the header block at the start of b and returns
// its length.
func HeaderBlockLen(b []byte) (int, error) {
	if len(b) < 1 {
		return 0, badHeaders("empty block")
	}
	n := int(b[0])
	if n > MaxHeaders {
		return 0, badHeaders("%d headers, at most %d", n, MaxHeaders)
	}
	at := 1
	for i := range n {
		if at >= len(b) {
			return 0, badHeaders("header %d truncated", i)
		}
		kl := int(b[at])
		if at+1+kl+2 > len(b) {
			return 0, badHeaders("header %d truncated", i)
		}
		k := b[at+1 : at+1+kl]
		vl := int(binary.BigEndian.Uint16(b[at+1+kl:]))
		end := at + 3 + kl + vl
		if end > len(b) {
			return 0, badHeaders("value of header %d truncated", i)
		}
		if err := checkHeader(string(k), string(b[at+3+kl:end])); err != nil {
			return 0, err
		}
		for j := 1; j < at; {
			okl := int(b[j])
			if string(b[j+1:j+1+okl]) == string(k) {
				return 0, badHeaders("key %q appears twice", k)
			}
			j += 3 + okl + int(binary.BigEndian.Uint16(b[j+1+okl:]))
		}
		at = end
	}
	if at > MaxHeaderBlockBytes {
		return 0, badHeaders("%d bytes, at most %d", at, MaxHeaderBlockBytes)
	}
	return at, nil
}

// ParseHeaders decodes a whole header block (nil for none).
func ParseHeaders(block []byte) ([]EventHeader, error) {
	n, err := HeaderBlockLen(block)
	if err != nil {
		return nil, err
	}
	if n != len(block) {
		return nil, badHeaders("%d bytes after the block", len(block)-n)
	}
	if block[0] == 0 {
		return nil, nil
	}
	hs := make([]EventHeader, 0, block[0])
	for at := 1; at < n; {
		kl := int(block[at])
		vl := int(binary.BigEndian.Uint16(block[at+1+kl:]))
		hs = append(hs, EventHeader{Key: string(block[at+1 : at+1+kl]), Value: string(block[at+3+kl : at+3+kl+vl])})
		at += 3 + kl + vl
	}
	return hs, nil
}

// EmptyHeaderBlock is the block of an event without headers.
var EmptyHeaderBlock = []byte{0}

// headerBlock reads one header block (aliasing the frame).
func (r *reader) headerBlock(field string) ([]byte, error) {
	n, err := HeaderBlockLen(r.b[r.off:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return r.take(field, n)
}

// appendHeadersJSON writes "headers":{"k":"v",...} in order; nothing for
// no headers.
func appendHeadersJSON(dst []byte, hs []EventHeader) []byte {
	if len(hs) == 0 {
		return dst
	}
	dst = append(dst, `,"headers":{`...)
	for i, h := range hs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, h.Key)
		dst = append(dst, ':')
		dst = appendString(dst, h.Value)
	}
	return append(dst, '}')
}

// headers decodes an optional "headers" object in member order, with the
// same bounds as a block. An empty object is no headers.
func (f *fields) headers() []EventHeader {
	v, ok := f.raw("headers")
	if !ok {
		return nil
	}
	return f.headerObject("headers", v)
}

func (f *fields) headerObject(name string, v []byte) []EventHeader {
	obj, ok := splitObject(v, nil)
	if !ok {
		f.err = &MalformedJSONError{Field: name, Err: errors.New("want an object of strings")}
		return nil
	}
	var hs []EventHeader
	for _, m := range obj {
		s, ok := f.text(name+"."+string(m.name), m.value)
		if !ok {
			return nil
		}
		hs = append(hs, EventHeader{Key: string(m.name), Value: s})
	}
	if err := CheckHeaders(hs); err != nil {
		f.err = &MalformedJSONError{Field: name, Err: err}
		return nil
	}
	return hs
}

// FormatHeaders renders hs as k=v pairs for people (strconv-quoted when
// they hold spaces or quotes).
func FormatHeaders(hs []EventHeader) string {
	var b []byte
	for i, h := range hs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, h.Key...)
		b = append(b, '=')
		if needsQuote(h.Value) {
			b = strconv.AppendQuote(b, h.Value)
		} else {
			b = append(b, h.Value...)
		}
	}
	return string(b)
}

func needsQuote(s string) bool {
	for _, c := range s {
		if c <= ' ' || c == '"' || c == '\\' || c >= 0x7f {
			return true
		}
	}
	return s == ""
}
