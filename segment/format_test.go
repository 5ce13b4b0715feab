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

// TestGoldenSegmentHeader is the published Felix's v3 header (and the v2
// one a v2 segment still has), byte for byte.
func TestGoldenSegmentHeader(t *testing.T) {
	for _, c := range []struct {
		version uint16
		hex     string
	}{
		{FormatVersion, "464C5347 0003 0000 0000000000000001 0000000000000002 ADEB65E9 00000000"},
		{FormatVersionV2, "464C5347 0002 0000 0000000000000001 0000000000000002 7A09E5B1 00000000"},
		{FormatVersionPublisher, "464C5347 0006 0000 0000000000000001 0000000000000002 9361E853 00000000"},
		{FormatVersionHeaders, "464C5347 8006 0000 0000000000000001 0000000000000002 F890A87F 00000000"},
	} {
		want := unhex(t, c.hex)
		got := AppendSegmentHeader(nil, SegmentHeader{Version: c.version, BaseOffset: 1, CreatedAtMicros: 2})
		require.Equal(t, want, got)
		h, kind, _ := parseSegmentHeader(got)
		require.Empty(t, kind)
		require.Equal(t, SegmentHeader{Version: c.version, BaseOffset: 1, CreatedAtMicros: 2}, h)
	}
	require.Equal(t, AppendSegmentHeader(nil, SegmentHeader{Version: FormatVersion, BaseOffset: 1, CreatedAtMicros: 2}),
		AppendSegmentHeader(nil, SegmentHeader{BaseOffset: 1, CreatedAtMicros: 2}), "new segments are v3")
}

// TestGoldenRecord is the published format's record vector (the same in v2
// and v3), the published opening-mark example, and a continuing record.
func TestGoldenRecord(t *testing.T) {
	for _, c := range []struct {
		hex  string
		mark Mark
	}{
		{"00000002 0000000000000007 0000000000000009 C654DE27 2402152C 6869", Mark{}},
		{"80000002 0000000000000007 0000000000000009 ADA59E0B 729B86BC 0000000000000001 0000000000000000 00000001 6869",
			Mark{Kind: MarkOpens, ProducerID: 1, Sequence: 0, Len: 1}},
	} {
		want := unhex(t, c.hex)
		got := AppendMarkedRecord(nil, 7, 9, c.mark, []byte("hi"))
		require.Equal(t, want, got)
		rec, n, err := DecodeRecord(got)
		require.NoError(t, err)
		require.Equal(t, len(want), n)
		require.Equal(t, Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi"), Mark: c.mark}, rec)
	}
	cont := AppendMarkedRecord(nil, 8, 9, Mark{Kind: MarkContinues}, []byte("hi"))
	require.Equal(t, "40000002", hex.EncodeToString(cont[:4]))
	require.Len(t, cont, RecordHeaderBytes+2, "only the opening record carries the tag")
	rec, _, err := DecodeRecord(cont)
	require.NoError(t, err)
	require.Equal(t, Mark{Kind: MarkContinues}, rec.Mark)
}

// TestGoldenPublisherRecord is the published v6 record with publisher "al"
// (bit 27: the body ends with the publisher and its length byte), and our
// record with headers (bit 26, FormatVersionHeaders: the block and its u16
// length before the publisher).
func TestGoldenPublisherRecord(t *testing.T) {
	for _, c := range []struct {
		hex     string
		rec     Record
		version uint16
	}{
		{"08000005 0000000000000007 0000000000000009 7B1D74DE 515E8163 6869 616C 02",
			Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi"), Publisher: []byte("al")}, FormatVersionPublisher},
		{"0400000A 0000000000000007 0000000000000009 6EA97AE0 B87115F2 6869 01016B000176 0006",
			Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi"), Headers: unhex(t, "01016B000176")}, FormatVersionHeaders},
		{"8C00000D 0000000000000007 0000000000000009 B8119035 7ACA265C 0000000000000001 0000000000000000 00000001 6869 01016B000176 0006 616C 02",
			Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi"), Headers: unhex(t, "01016B000176"), Publisher: []byte("al"),
				Mark: Mark{Kind: MarkOpens, ProducerID: 1, Len: 1}}, FormatVersionHeaders},
	} {
		want := unhex(t, c.hex)
		got := AppendFullRecord(nil, c.rec)
		require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
		rec, n, err := DecodeVersionRecord(got, c.version)
		require.NoError(t, err)
		require.Equal(t, len(want), n)
		require.Equal(t, c.rec, rec)
		_, _, err = DecodeRecord(got)
		require.ErrorIs(t, err, ErrCorrupt, "a v3 segment holds neither")
	}
	// A publisher length past the body is corruption, not a short read.
	b := AppendFullRecord(nil, Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi"), Publisher: []byte("al")})
	b[len(b)-1] = 9
	be.PutUint32(b[24:], crcIEEE(append(append([]byte(nil), b[0:24]...), b[RecordHeaderBytes:]...)))
	_, _, err := DecodeVersionRecord(b, FormatVersionPublisher)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, KindRecordTrailer, ce.Kind)
}

// TestRecordKindsByVersion: a v2 segment has no kind bits (a top bit is an
// oversized length); a v3 one refuses the v4-v6 kinds and both batch bits;
// v6 takes the publisher bit and FormatVersionHeaders the headers bit too;
// the generation-start and commit kinds are refused everywhere.
func TestRecordKindsByVersion(t *testing.T) {
	marked := AppendMarkedRecord(nil, 7, 9, Mark{Kind: MarkOpens, ProducerID: 1, Len: 1}, []byte("hi"))
	_, _, _, v := decodeRecord(marked, FormatVersionV2)
	require.Equal(t, decodeTooLarge, v)
	for version, refused := range map[uint16][]uint32{
		FormatVersionPublisher: {1 << 29, 1 << 28, 3 << 30},
		FormatVersionHeaders:   {1 << 29, 1 << 28, 3 << 30},
	} {
		for _, bits := range refused {
			b := append([]byte(nil), marked...)
			be.PutUint32(b[0:], 2|bits)
			be.PutUint32(b[20:], crcIEEE(b[0:20]))
			_, _, err := DecodeVersionRecord(b, version)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, KindRecordFlags, ce.Kind, "version %#x bits %#x", version, bits)
		}
	}
	b26 := append([]byte(nil), marked...)
	be.PutUint32(b26[0:], 2|1<<26)
	be.PutUint32(b26[20:], crcIEEE(b26[0:20]))
	_, _, _, v = decodeRecord(b26, FormatVersion)
	require.Equal(t, decodeTooLarge, v, "bit 26 is length below FormatVersionHeaders")
	for _, bits := range []uint32{1 << 29, 1 << 28, 1 << 27, 3 << 30} {
		b := append([]byte(nil), marked...)
		be.PutUint32(b[0:], 2|bits)
		be.PutUint32(b[20:], crcIEEE(b[0:20]))
		_, _, err := DecodeRecord(b)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, KindRecordFlags, ce.Kind, "bits %#x", bits)
	}
	// The tag is checksummed: a flipped sequence is caught.
	_, _, err := DecodeRecord(flip(marked, RecordHeaderBytes+12))
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestSegmentHeaderRejects(t *testing.T) {
	good := AppendSegmentHeader(nil, SegmentHeader{BaseOffset: 5})
	cases := map[CorruptionKind]func(b []byte){
		KindSegmentMagic:          func(b []byte) { b[0] ^= 1 },
		KindSegmentVersion:        func(b []byte) { b[5] = 4 }, // v1 is rejected, and so are v4, v5 and 7
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
	putRecordHeader(b, 1, 2, Mark{}, body{})
	be.PutUint32(b[0:], n)
	c := crcIEEE(b[0:20])
	be.PutUint32(b[20:], c)
	return b
}

func TestIndexEncodeParse(t *testing.T) {
	entries := []IndexEntry{{Offset: 10, Position: 32}, {Offset: 50, Position: 4200}}
	b := encodeIndex(10, entries)
	require.Len(t, b, IndexHeaderBytes+2*IndexEntryBytes)
	require.Equal(t, unhex(t, "464C5349 0003 0000 000000000000000A 0000000000000000"), b[:IndexHeaderBytes])
	for _, v := range []uint16{2, 4} { // same layout, read
		old := append([]byte(nil), b...)
		be.PutUint16(old[4:], v)
		got, ok := parseIndex(old, 10)
		require.True(t, ok)
		require.Equal(t, entries, got)
	}
	got, ok := parseIndex(b, 10)
	require.True(t, ok)
	require.Equal(t, entries, got)
	got, ok = parseIndex(b[:len(b)-3], 10) // torn final entry tolerated
	require.True(t, ok)
	require.Equal(t, entries[:1], got)
	_, ok = parseIndex(b, 11)
	require.False(t, ok)
}
