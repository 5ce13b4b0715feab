package segment

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// TestGoldenSegmentHeader is the vector of reference 3.2, byte for byte.
func TestGoldenSegmentHeader(t *testing.T) {
	want := unhex(t, "464C5347 0002 0000 0000000000000001 0000000000000002 7A09E5B1 00000000")
	got := AppendSegmentHeader(nil, SegmentHeader{BaseOffset: 1, CreatedAtMicros: 2})
	require.Equal(t, want, got)
	h, kind, _ := parseSegmentHeader(got)
	require.Empty(t, kind)
	require.Equal(t, SegmentHeader{BaseOffset: 1, CreatedAtMicros: 2}, h)
}

// TestGoldenRecord is the vector of reference 3.2, byte for byte.
func TestGoldenRecord(t *testing.T) {
	want := unhex(t, "00000002 0000000000000007 0000000000000009 C654DE27 2402152C 6869")
	got := AppendRecord(nil, 7, 9, []byte("hi"))
	require.Equal(t, want, got)
	rec, n, err := DecodeRecord(got)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	require.Equal(t, Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")}, rec)
}

func TestSegmentHeaderRejects(t *testing.T) {
	good := AppendSegmentHeader(nil, SegmentHeader{BaseOffset: 5})
	cases := map[CorruptionKind]func(b []byte){
		KindSegmentMagic:          func(b []byte) { b[0] ^= 1 },
		KindSegmentVersion:        func(b []byte) { b[5] = 1 }, // v1 is rejected
		KindSegmentFlags:          func(b []byte) { b[7] = 1 },
		KindSegmentHeaderChecksum: func(b []byte) { b[12] ^= 1 },
		KindTruncated:             nil,
	}
	for kind, mut := range cases {
		t.Run(string(kind), func(t *testing.T) {
			b := append([]byte(nil), good...)
			if mut == nil {
				b = b[:20]
			} else {
				mut(b)
			}
			_, got, _ := parseSegmentHeader(b)
			require.Equal(t, kind, got)
		})
	}
}

func TestRecordDecodeVerdicts(t *testing.T) {
	good := AppendRecord(nil, 1, 2, []byte("payload"))
	for name, tc := range map[string]struct {
		mut  func([]byte) []byte
		kind CorruptionKind
	}{
		"short header":  {func(b []byte) []byte { return b[:10] }, KindTruncated},
		"short payload": {func(b []byte) []byte { return b[:len(b)-1] }, KindTruncated},
		"header crc":    {func(b []byte) []byte { b[5] ^= 1; return b }, KindRecordHeaderChecksum},
		"payload crc":   {func(b []byte) []byte { b[30] ^= 1; return b }, KindRecordChecksum},
		"record crc":    {func(b []byte) []byte { b[25] ^= 1; return b }, KindRecordChecksum},
		"too large": {func(b []byte) []byte {
			return append(AppendRecord(nil, 1, 2, nil)[:0], encodeHeaderLen(MaxPayloadBytes+1)...)
		}, KindRecordTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := DecodeRecord(tc.mut(append([]byte(nil), good...)))
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Equal(t, tc.kind, ce.Kind)
		})
	}
}

// encodeHeaderLen builds a header with a valid header CRC claiming n bytes.
func encodeHeaderLen(n uint32) []byte {
	b := make([]byte, RecordHeaderBytes)
	putRecordHeader(b, 1, 2, nil)
	be.PutUint32(b[0:], n)
	c := crcIEEE(b[0:20])
	be.PutUint32(b[20:], c)
	return b
}

func TestIndexEncodeParse(t *testing.T) {
	entries := []IndexEntry{{Offset: 10, Position: 32}, {Offset: 50, Position: 4200}}
	b := encodeIndex(10, entries)
	require.Len(t, b, IndexHeaderBytes+2*IndexEntryBytes)
	require.Equal(t, unhex(t, "464C5349 0002 0000 000000000000000A 0000000000000000"), b[:IndexHeaderBytes])
	got, ok := parseIndex(b, 10)
	require.True(t, ok)
	require.Equal(t, entries, got)
	got, ok = parseIndex(b[:len(b)-3], 10) // torn final entry tolerated
	require.True(t, ok)
	require.Equal(t, entries[:1], got)
	_, ok = parseIndex(b, 11)
	require.False(t, ok)
}
