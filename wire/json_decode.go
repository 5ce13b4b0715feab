package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// DecodeJSON decodes a JSON message payload (frame flags 0).
//
// It follows serde's rules for the v1 enum: unknown fields are ignored, a
// missing or null required field is ErrMissingField, a missing or null
// optional field is absent, wrong JSON types and non-canonical base64 are
// ErrMalformedJSON, an unknown "type" is ErrUnknownMessageType. Field names
// match exactly (encoding/json's case-insensitive struct matching is
// avoided by decoding into a map first).
//
// Invalid UTF-8, and \u escapes that encode a lone surrogate, are
// ErrInvalidUTF8: encoding/json would silently turn both into U+FFFD, and a
// name that changed in transit must not address a different stream.
//
// Decoded byte fields are fresh copies; nothing aliases payload.
func DecodeJSON(payload []byte) (Message, error) {
	if !utf8.Valid(payload) {
		return nil, &InvalidUTF8Error{Field: "JSON message"}
	}
	if err := checkSurrogates(payload); err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return nil, &MalformedJSONError{Err: err}
	}
	if obj == nil {
		return nil, &MalformedJSONError{Err: errors.New("message is not an object")}
	}
	f := fields{obj: obj}
	name := f.str("type")
	if f.err != nil {
		return nil, f.err
	}
	t, ok := ParseMessageType(name)
	if !ok {
		return nil, &UnknownMessageTypeError{Type: name}
	}
	f.typ = name
	m := jsonDecoders[t](&f)
	if f.err != nil {
		return nil, f.err
	}
	return m, nil
}

// checkSurrogates rejects \uD800-\uDFFF escapes that are not a high
// surrogate immediately followed by a low one. Backslashes only occur inside
// strings in valid JSON, and any that do not are left for the parser to
// reject, so a flat scan suffices.
func checkSurrogates(b []byte) error {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++ // the escaped character; the loop's i++ steps past it
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b, i+1)
		if !ok {
			continue
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return &InvalidUTF8Error{Field: "JSON \\u escape (lone low surrogate)"}
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return &InvalidUTF8Error{Field: "JSON \\u escape (lone high surrogate)"}
			}
			if lo, ok := hex4(b, i+3); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return &InvalidUTF8Error{Field: "JSON \\u escape (lone high surrogate)"}
			}
			i += 6
		}
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// fields reads typed values out of one decoded object, keeping the first
// error so each message decoder is a flat list of field reads.
type fields struct {
	typ string
	obj map[string]json.RawMessage
	err error
}

var jsonNull = []byte("null")

// raw returns a present, non-null field. Absent and null are the same, as
// for serde's Option.
func (f *fields) raw(name string) (json.RawMessage, bool) {
	if f.err != nil {
		return nil, false
	}
	v, ok := f.obj[name]
	v = bytes.TrimSpace(v)
	if !ok || bytes.Equal(v, jsonNull) {
		return nil, false
	}
	return v, true
}

// required returns a present field or records ErrMissingField.
func (f *fields) required(name string) (json.RawMessage, bool) {
	v, ok := f.raw(name)
	if !ok && f.err == nil {
		f.err = &MissingFieldError{Type: f.typ, Field: name}
	}
	return v, ok
}

func (f *fields) unmarshal(name string, v json.RawMessage, dst any) bool {
	if err := json.Unmarshal(v, dst); err != nil {
		f.err = &MalformedJSONError{Field: name, Err: err}
		return false
	}
	return true
}

func (f *fields) str(name string) string {
	var s string
	if v, ok := f.required(name); ok {
		f.unmarshal(name, v, &s)
	}
	return s
}

func (f *fields) u64(name string) uint64 {
	var n uint64
	if v, ok := f.required(name); ok {
		f.unmarshal(name, v, &n)
	}
	return n
}

func (f *fields) optU64(name string) *uint64 {
	v, ok := f.raw(name)
	if !ok {
		return nil
	}
	var n uint64
	if !f.unmarshal(name, v, &n) {
		return nil
	}
	return &n
}

func (f *fields) optStr(name string) *string {
	v, ok := f.raw(name)
	if !ok {
		return nil
	}
	var s string
	if !f.unmarshal(name, v, &s) {
		return nil
	}
	return &s
}

func (f *fields) optU32(name string) *uint32 {
	v, ok := f.raw(name)
	if !ok {
		return nil
	}
	var n uint32
	if !f.unmarshal(name, v, &n) {
		return nil
	}
	return &n
}

func (f *fields) u16(name string) uint16 {
	var n uint16
	if v, ok := f.required(name); ok {
		f.unmarshal(name, v, &n)
	}
	return n
}

func (f *fields) optU16(name string) *uint16 {
	v, ok := f.raw(name)
	if !ok {
		return nil
	}
	var n uint16
	if !f.unmarshal(name, v, &n) {
		return nil
	}
	return &n
}

// b64 decodes canonical padded standard base64, as the Rust base64 crate's
// STANDARD engine requires: Go's decoder alone would also accept embedded
// CR/LF and non-zero trailing bits.
func (f *fields) b64(name, s string) []byte {
	if f.err != nil {
		return nil
	}
	if strings.ContainsAny(s, "\r\n") {
		f.err = &MalformedJSONError{Field: name, Err: errors.New("line break in base64")}
		return nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		f.err = &MalformedJSONError{Field: name, Err: err}
		return nil
	}
	return b
}

func (f *fields) bytes(name string) []byte {
	return f.b64(name, f.str(name))
}

func (f *fields) bytesList(name string) [][]byte {
	v, ok := f.required(name)
	if !ok {
		return nil
	}
	var list []*string
	if !f.unmarshal(name, v, &list) {
		return nil
	}
	out := make([][]byte, len(list))
	for i, s := range list {
		if s == nil {
			f.err = &MalformedJSONError{Field: name, Err: errors.New("null element")}
			return nil
		}
		out[i] = f.b64(name, *s)
	}
	return out
}
