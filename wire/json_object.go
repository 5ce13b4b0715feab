package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// object is the top-level members of one JSON object, values as raw JSON
// without surrounding whitespace. Lookups take the last member of a name,
// as decoding into a map does (a later duplicate wins).
type object []member

type member struct {
	name  []byte
	value []byte
}

func (o object) get(name string) ([]byte, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if string(o[i].name) == name {
			return o[i].value, true
		}
	}
	return nil, false
}

// objectOf is the members of a decoded map (keys are unique, so the map's
// random order cannot change what get finds).
func objectOf(m map[string]json.RawMessage) object {
	o := make(object, 0, len(m))
	for k, v := range m {
		o = append(o, member{name: []byte(k), value: v})
	}
	return o
}

// splitObject splits b, which must hold exactly one JSON object, into its
// members in one pass, validating the whole input as it goes. ok false
// means "not sure", never "invalid": b is not an object, is not valid JSON,
// has a key with an escape, or nests deeper than maxSplitDepth. The caller
// then decodes with encoding/json, which is ~8x slower on a control
// message (BenchmarkDecodeJSON*) but has the exact error to report. When
// ok is true the members are what encoding/json would decode into a
// map[string]json.RawMessage (FuzzSplitObject checks this on every input).
//
// The caller has checked that b is valid UTF-8.
func splitObject(b []byte, into object) (_ object, ok bool) {
	s := scanner{b: b, collect: true, members: into}
	s.space()
	if s.i >= len(b) || b[s.i] != '{' || !s.nested('}', true) {
		return nil, false
	}
	s.space()
	if s.i != len(b) {
		return nil, false
	}
	return s.members, true
}

// maxSplitDepth bounds the nesting splitObject follows; deeper input goes
// to encoding/json (which allows 10000 levels).
const maxSplitDepth = 64

// scanner is a JSON validator (RFC 8259) over b from i, without decoding.
type scanner struct {
	b     []byte
	i     int
	depth int
	// collect appends the members of the outermost object to members; a
	// key with an escape there fails the scan (its name would need
	// decoding).
	collect bool
	members object
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) take(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.quoted()
		return ok
	case c == '{':
		return s.nested('}', true)
	case c == '[':
		return s.nested(']', false)
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// nested skips an object (keyed) or an array that starts at s.i.
func (s *scanner) nested(end byte, keyed bool) bool {
	if s.depth++; s.depth > maxSplitDepth {
		return false
	}
	s.i++
	s.space()
	if s.take(end) {
		s.depth--
		return true
	}
	for {
		var name []byte
		var escaped bool
		if keyed {
			start := s.i
			var ok bool
			if escaped, ok = s.quoted(); !ok {
				return false
			}
			name = s.b[start+1 : s.i-1]
			s.space()
			if !s.take(':') {
				return false
			}
			s.space()
		}
		start := s.i
		if !s.value() {
			return false
		}
		if keyed && s.depth == 1 && s.collect {
			if escaped {
				return false
			}
			s.members = append(s.members, member{name: name, value: s.b[start:s.i]})
		}
		s.space()
		if s.take(end) {
			s.depth--
			return true
		}
		if !s.take(',') {
			return false
		}
		s.space()
	}
}

// quoted skips a string that starts at s.i (at its quote), reporting
// whether it held an escape.
func (s *scanner) quoted() (escaped, ok bool) {
	if !s.take('"') {
		return false, false
	}
	for {
		s.skipPlain()
		if s.i >= len(s.b) {
			return false, false
		}
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return escaped, true
		case c < 0x20:
			return false, false
		}
		// c is a backslash.
		escaped = true
		if s.i >= len(s.b) {
			return false, false
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if _, ok := hex4(s.b, s.i); !ok {
				return false, false
			}
			s.i += 4
		default:
			return false, false
		}
	}
}

// skipPlain advances past string bytes that need no attention (not a
// quote, a backslash or a control character): byte by byte for the first
// eight (names and ids end there), then eight at a time while it can (a
// base64 value is most of a queue or cache message).
func (s *scanner) skipPlain() {
	for {
		for end := min(s.i+8, len(s.b)); s.i < end; s.i++ {
			if c := s.b[s.i]; c == '"' || c == '\\' || c < 0x20 {
				return
			}
		}
		// special is exact: the word that stops this holds the byte the
		// loop above then finds.
		for s.i+8 <= len(s.b) && !special(binary.LittleEndian.Uint64(s.b[s.i:])) {
			s.i += 8
		}
		if s.i >= len(s.b) {
			return
		}
	}
}

// special reports whether any byte of x is '"', '\\' or below 0x20, with
// the "has a zero byte" and "has a byte below n" word tests. They are exact
// for n <= 128: a byte below n always sets its own high bit in (v-n)&^v; a
// byte at or above n sets it only when v >= 128+n, where &^v clears it; and
// a borrow starts only at a byte truly below n, so the lowest flagged byte
// is a real one. (A helper checked all 2^24 three-byte words.)
func special(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((q-ones)&^q|(b-ones)&^b|(x-ones*0x20)&^x)&highs != 0
}

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() bool {
	s.take('-')
	if !s.take('0') && !s.digits() { // no more digits after a leading zero
		return false
	}
	if s.take('.') && !s.digits() {
		return false
	}
	if s.take('e') || s.take('E') {
		if !s.take('+') {
			s.take('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits skips one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// plainString returns the contents of a JSON string value without escapes
// (v is valid JSON: it came through splitObject or encoding/json).
func plainString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') >= 0 {
		return nil, false
	}
	return body, true
}

// plainUint returns a JSON number made of decimal digits only that fits in
// bits; anything else (a sign, a fraction, an exponent, an overflow) is
// left to encoding/json and its error.
func plainUint(v []byte, bits uint) (uint64, bool) {
	if len(v) == 0 || len(v) > 20 {
		return 0, false
	}
	limit := uint64(1)<<bits - 1 // a shift by 64 is 0 in Go, so this is all ones
	var n uint64
	for _, c := range v {
		d := uint64(c - '0')
		if d > 9 || n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
