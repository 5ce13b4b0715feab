package knob

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { s, ok := m[k]; return s, ok }
}

func testRegistry() (*Registry, Int, Bytes, Bool, Enum, String, Duration) {
	r := New()
	i := r.Int("FELIX_T_INT", 8, 1, 64, "an int")
	b := r.Bytes("FELIX_T_BYTES", 16<<20, 1024, 1<<30, "a size")
	o := r.Bool("FELIX_T_BOOL", true, "a bool")
	e := r.Enum("FELIX_T_ENUM", "drop_new", []string{"drop_new", "drop_old", "block"}, "an enum")
	s := r.HostPort("FELIX_T_BIND", "127.0.0.1:5000", "a bind")
	d := r.Duration("FELIX_T_WAIT_MS", 250, 1, 60000, time.Millisecond, "a wait")
	return r, i, b, o, e, s, d
}

func TestDefaultsApplyWhenUnset(t *testing.T) {
	r, i, b, o, e, s, d := testRegistry()
	v, err := r.Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, int64(8), i.Get(v))
	require.Equal(t, int64(16<<20), b.Get(v))
	require.True(t, o.Get(v))
	require.Equal(t, "drop_new", e.Get(v))
	require.Equal(t, "127.0.0.1:5000", s.Get(v))
	require.Equal(t, 250*time.Millisecond, d.Get(v))
}

func TestValuesParse(t *testing.T) {
	r, i, b, o, e, s, d := testRegistry()
	v, err := r.Load(env(map[string]string{
		"FELIX_T_INT": "64", "FELIX_T_BYTES": "4 MiB", "FELIX_T_BOOL": "off",
		"FELIX_T_ENUM": "block", "FELIX_T_BIND": "[::1]:0", "FELIX_T_WAIT_MS": "1",
	}))
	require.NoError(t, err)
	require.Equal(t, int64(64), i.Get(v))
	require.Equal(t, int64(4<<20), b.Get(v))
	require.False(t, o.Get(v))
	require.Equal(t, "block", e.Get(v))
	require.Equal(t, "[::1]:0", s.Get(v))
	require.Equal(t, time.Millisecond, d.Get(v))
	raw, ok := v.Raw("FELIX_T_BYTES")
	require.True(t, ok)
	require.Equal(t, "4 MiB", raw)
}

// Every bad value is reported, each naming the knob, the value and what is allowed.
func TestBadValuesNameKnobValueAndAllowed(t *testing.T) {
	r, _, _, _, _, _, _ := testRegistry()
	cases := map[string]string{
		"FELIX_T_INT":     "abc",
		"FELIX_T_BYTES":   "12 parsecs",
		"FELIX_T_BOOL":    "maybe",
		"FELIX_T_ENUM":    "drop_all",
		"FELIX_T_BIND":    "localhost",
		"FELIX_T_WAIT_MS": "0",
	}
	_, err := r.Load(env(cases))
	require.ErrorIs(t, err, ErrInvalid)
	for name, val := range cases {
		require.Contains(t, err.Error(), name+`="`+val+`"`)
	}
	require.Contains(t, err.Error(), "one of drop_new|drop_old|block")
	require.Contains(t, err.Error(), "integer ms in [1, 60000]")

	var ve *ValueError
	require.True(t, errors.As(err, &ve))
}

func TestOutOfRange(t *testing.T) {
	r, _, _, _, _, _, _ := testRegistry()
	_, err := r.Load(env(map[string]string{"FELIX_T_INT": "65"}))
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "out of range")
	require.Contains(t, err.Error(), "integer in [1, 64]")
}

func TestUnknownKnobsAreListed(t *testing.T) {
	r, _, _, _, _, _, _ := testRegistry()
	require.Equal(t, []string{"FELIX_T_INTT"}, r.Unknown([]string{"FELIX_T_INTT=3", "FELIX_T_INT=3", "PATH=/bin"}))
}

func TestDeclarationMistakesPanic(t *testing.T) {
	r := New()
	require.Panics(t, func() { r.Int("NOPREFIX", 1, 0, 2, "") })
	require.Panics(t, func() { r.Int("FELIX_BAD_DEFAULT", 5, 0, 2, "") })
	r.Int("FELIX_ONCE", 1, 0, 2, "")
	require.Panics(t, func() { r.Int("FELIX_ONCE", 1, 0, 2, "") })
}

func TestBytesFormatRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 1000, 1024, 65536, 16 << 20, 3 << 30} {
		got, err := ParseBytes(FormatBytes(n))
		require.NoError(t, err)
		require.Equal(t, n, got)
	}
}

func TestTables(t *testing.T) {
	r, _, _, _, _, _, _ := testRegistry()
	v, err := r.Load(env(map[string]string{"FELIX_T_INT": "9"}))
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, r.WriteTable(&b, v))
	require.Contains(t, b.String(), "FELIX_T_INT")
	require.Contains(t, b.String(), "(default)")
	require.Regexp(t, `FELIX_T_INT\s+8\s+9\s`, b.String())
	require.Contains(t, r.Markdown(), "| `FELIX_T_ENUM` | `drop_new` | one of drop_new\\|drop_old\\|block | an enum |")
}

// A List set to "" is the empty list; unset, its default. Any other knob
// set to "" keeps its default.
func TestListEmptyIsEmpty(t *testing.T) {
	r := New()
	l := r.List("FELIX_T_LIST", "a,b", "comma list, or empty", "a list", nil)
	s := r.String("FELIX_T_STR", "x", "a word", "a string", nil)
	v, err := r.Load(func(k string) (string, bool) { return "", true })
	require.NoError(t, err)
	require.Equal(t, "", l.Get(v))
	require.Equal(t, "x", s.Get(v))
	v, err = r.Load(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	require.Equal(t, "a,b", l.Get(v))
}
