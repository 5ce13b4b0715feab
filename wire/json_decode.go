package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"unicode/utf8"
)

// DecodeJSON decodes a JSON message payload (frame flags 0).
//
// It follows serde's rules for the v1 enum: unknown fields are ignored, a
// missing or null required field is ErrMissingField, a missing or null
// optional field is absent, wrong JSON types and non-canonical base64 are
// ErrMalformedJSON, an unknown "type" is ErrUnknownMessageType. Field names
// match exactly (encoding/json's case-insensitive struct matching is
// avoided by splitting the object into its members first; a later duplicate
// member wins, as in a map).
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
	f := fieldsPool.Get().(*fields)
	defer f.recycle()
	obj, ok := splitObject(payload, f.obj[:0])
	if !ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			return nil, &MalformedJSONError{Err: err}
		}
		if m == nil {
			return nil, &MalformedJSONError{Err: errors.New("message is not an object")}
		}
		obj = objectOf(m)
	}
	f.obj = obj
	name := f.str("type")
	if f.err != nil {
		return nil, f.err
	}
	t, ok := ParseMessageType(name)
	if !ok {
		return nil, &UnknownMessageTypeError{Type: name}
	}
	f.typ = name
	m := jsonDecoders[t](f)
	if f.err != nil {
		return nil, f.err
	}
	return m, nil
}

// fieldsPool recycles the fields of DecodeJSON and their member slice: the
// decoders are called through a table, so a fields on the stack escapes,
// and at a queue drain's ~260 k messages/s that was ~125 MB/s of garbage.
var fieldsPool = sync.Pool{New: func() any { return &fields{obj: make(object, 0, 10)} }}

// recycle returns f to the pool without references into the payload (the
// whole backing array: a refused split may have written past len), unless
// a message of many members grew it.
func (f *fields) recycle() {
	if cap(f.obj) > 64 {
		return
	}
	obj := f.obj[:cap(f.obj)]
	clear(obj)
	*f = fields{obj: obj[:0]}
	fieldsPool.Put(f)
}

// checkSurrogates rejects \uD800-\uDFFF escapes that are not a high
// surrogate immediately followed by a low one. Backslashes only occur inside
// strings in valid JSON, and any that do not are left for the parser to
// reject, so a flat scan suffices.
func checkSurrogates(b []byte) error {
	for i := 0; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return nil
		}
		i += j + 1 // the escaped character; the loop's i++ steps past it
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
	obj object
	err error
}

var jsonNull = []byte("null")

// raw returns a present, non-null field. Absent and null are the same, as
// for serde's Option.
func (f *fields) raw(name string) (json.RawMessage, bool) {
	if f.err != nil {
		return nil, false
	}
	v, ok := f.obj.get(name)
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

// text decodes a string value, without encoding/json when it has no
// escapes.
func (f *fields) text(name string, v json.RawMessage) (string, bool) {
	if s, ok := plainString(v); ok {
		return string(s), true
	}
	var s string
	return s, f.unmarshal(name, v, &s)
}

// unsigned decodes an unsigned value of bits, without encoding/json when
// it is plain digits that fit.
func (f *fields) unsigned(name string, v json.RawMessage, bits uint) (uint64, bool) {
	if n, ok := plainUint(v, bits); ok {
		return n, true
	}
	var n uint64
	var ok bool
	switch bits {
	case 16:
		var x uint16
		ok = f.unmarshal(name, v, &x)
		n = uint64(x)
	case 32:
		var x uint32
		ok = f.unmarshal(name, v, &x)
		n = uint64(x)
	default:
		ok = f.unmarshal(name, v, &n)
	}
	return n, ok
}

func (f *fields) str(name string) string {
	if v, ok := f.required(name); ok {
		s, _ := f.text(name, v)
		return s
	}
	return ""
}

func (f *fields) reqUint(name string, bits uint) uint64 {
	if v, ok := f.required(name); ok {
		n, _ := f.unsigned(name, v, bits)
		return n
	}
	return 0
}

func (f *fields) optUint(name string, bits uint) (uint64, bool) {
	v, ok := f.raw(name)
	if !ok {
		return 0, false
	}
	return f.unsigned(name, v, bits)
}

func (f *fields) u64(name string) uint64 { return f.reqUint(name, 64) }

func (f *fields) u16(name string) uint16 { return uint16(f.reqUint(name, 16)) }

func (f *fields) optU64(name string) *uint64 {
	if n, ok := f.optUint(name, 64); ok {
		return &n
	}
	return nil
}

func (f *fields) optU32(name string) *uint32 {
	if n, ok := f.optUint(name, 32); ok {
		x := uint32(n)
		return &x
	}
	return nil
}

func (f *fields) optU16(name string) *uint16 {
	if n, ok := f.optUint(name, 16); ok {
		x := uint16(n)
		return &x
	}
	return nil
}

func (f *fields) optStr(name string) *string {
	v, ok := f.raw(name)
	if !ok {
		return nil
	}
	if s, ok := f.text(name, v); ok {
		return &s
	}
	return nil
}

// b64 decodes canonical padded standard base64, as the Rust base64 crate's
// STANDARD engine requires: Go's decoder alone would also accept embedded
// CR/LF and non-zero trailing bits.
func (f *fields) b64(name string, src []byte) []byte {
	if f.err == nil && (bytes.IndexByte(src, '\r') >= 0 || bytes.IndexByte(src, '\n') >= 0) {
		f.err = &MalformedJSONError{Field: name, Err: errors.New("line break in base64")}
	}
	return f.b64NoBreaks(name, src)
}

// b64NoBreaks is b64 for text that cannot hold a line break: a JSON
// string's raw body (control bytes are invalid there; only an escape
// makes one, and unescaped text goes through b64).
func (f *fields) b64NoBreaks(name string, src []byte) []byte {
	if f.err != nil {
		return nil
	}
	enc := base64.StdEncoding.Strict()
	b := make([]byte, enc.DecodedLen(len(src)))
	n, err := enc.Decode(b, src)
	if err != nil {
		f.err = &MalformedJSONError{Field: name, Err: err}
		return nil
	}
	return b[:n]
}

// b64Value decodes a base64 string value, straight from the payload when
// it has no escapes.
func (f *fields) b64Value(name string, v json.RawMessage) []byte {
	if s, ok := plainString(v); ok {
		return f.b64NoBreaks(name, s)
	}
	var s string
	if f.unmarshal(name, v, &s) {
		return f.b64(name, []byte(s))
	}
	return nil
}

func (f *fields) bytes(name string) []byte {
	if v, ok := f.required(name); ok {
		return f.b64Value(name, v)
	}
	return nil
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
		out[i] = f.b64(name, []byte(*s))
	}
	return out
}
