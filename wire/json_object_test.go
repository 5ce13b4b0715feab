package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzSplitObject checks splitObject against encoding/json on any input:
// whenever it answers, the input is valid JSON and its members are what
// encoding/json decodes into a map (a later duplicate winning). Refusing is
// always allowed (DecodeJSON then asks encoding/json). Seeds: every JSON
// vector (testdata/fuzz/FuzzSplitObject) and the edge cases below.
func FuzzSplitObject(f *testing.F) {
	for _, s := range splitEdgeCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSplit(t, b) })
}

var splitEdgeCases = []string{
	`{}`, ` { } `, `{"a":1,"a":2}`, `{"a":{"b":[1,2,{"c":null}]},"d":"e"}`,
	`{"a":-0.5e+10,"b":0,"c":-0,"d":1E3,"e":[]}`, `{"a":"\u00e9\n\"\\\/"}`,
	`{"\u0061":1}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`,
	"{\"a\":\"\x01\"}", `{"a":"\q"}`, `{"a":"\u12"}`, `{"a":tru}`, `{"a":nul}`,
	`{"a":1,}`, `{,}`, `{"a":1}x`, `{"a":1}{}`, `{"a" 1}`, `{"a":}`, `{"a"`, `{`,
	`[1]`, `null`, `"s"`, `1`, "{\"a\":1}\t\r\n ", `{"a":[1,]}`, `{"a":{"b"}}`,
	`{"a":[` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `]}`,
}

func checkSplit(t *testing.T, b []byte) {
	if !utf8.Valid(b) {
		return // DecodeJSON rejects it before splitting
	}
	obj, ok := splitObject(b, nil)
	if !ok {
		return
	}
	require.True(t, json.Valid(b), "split accepted invalid JSON %q", b)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m))
	require.NotNil(t, m, "split accepted a non-object %q", b)
	got := map[string]string{}
	for _, mb := range obj {
		got[string(mb.name)] = string(mb.value)
	}
	want := map[string]string{}
	for k, v := range m {
		want[k] = string(bytes.TrimSpace(v))
	}
	require.Equal(t, want, got, "%q", b)
	for _, mb := range obj {
		v, ok := obj.get(string(mb.name))
		require.True(t, ok)
		require.Equal(t, want[string(mb.name)], string(v))
	}
}

func TestSplitObjectEdgeCases(t *testing.T) {
	for _, s := range splitEdgeCases {
		checkSplit(t, []byte(s))
	}
	// What the fast path must take, so control messages do not fall back.
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":{"b":[1,2,{"c":null}]},"d":"e"}`,
		`{"a":-0.5e+10,"b":0,"c":-0,"d":1E3,"e":[]}`, `{"a":"\u00e9\n\"\\\/"}`} {
		_, ok := splitObject([]byte(s), nil)
		require.True(t, ok, s)
	}
}

// TestPlainUintMatchesEncodingJSON: the digits fast path gives what
// encoding/json gives, and refuses (leaving encoding/json to report) what
// does not fit.
func TestPlainUintMatchesEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		v    string
		bits uint
		ok   bool
	}{
		{"0", 64, true}, {"18446744073709551615", 64, true}, {"18446744073709551616", 64, false},
		{"99999999999999999999", 64, false}, {"4294967295", 32, true}, {"4294967296", 32, false},
		{"65535", 16, true}, {"65536", 16, false}, {"-1", 64, false}, {"1e3", 64, false},
		{"1.0", 64, false}, {"", 64, false}, {"123456789012345678901", 64, false},
	} {
		n, ok := plainUint([]byte(c.v), c.bits)
		require.Equal(t, c.ok, ok, c.v)
		if !ok {
			continue
		}
		var want uint64
		require.NoError(t, json.Unmarshal([]byte(c.v), &want))
		require.Equal(t, want, n, c.v)
	}
}

// TestSpecialIsExact: the word test agrees with a byte-by-byte look on
// words mixing every interesting byte (the borrow of a subtraction must not
// hide or invent one).
func TestSpecialIsExact(t *testing.T) {
	interesting := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w [8]byte
		want := false
		for i := range w {
			if rng.IntN(3) == 0 {
				w[i] = interesting[rng.IntN(len(interesting))]
			} else {
				w[i] = byte(rng.IntN(256))
			}
			want = want || w[i] == '"' || w[i] == '\\' || w[i] < 0x20
		}
		require.Equal(t, want, special(binary.LittleEndian.Uint64(w[:])), "%x", w)
	}
}
