package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Format v2 constants (docs/storage-format.md). All integers are big-endian.
const (
	SegmentMagic       uint32 = 0x464C5347 // "FLSG"
	IndexMagic         uint32 = 0x464C5349 // "FLSI"
	FormatVersion      uint16 = 2
	SegmentHeaderBytes        = 32
	RecordHeaderBytes         = 28
	IndexHeaderBytes          = 24
	IndexEntryBytes           = 16
	// MaxPayloadBytes is the largest payload a record may carry.
	MaxPayloadBytes = 64 << 20
)

var be = binary.BigEndian

// SegmentHeader is the first 32 bytes of a .log file.
type SegmentHeader struct {
	BaseOffset      uint64
	CreatedAtMicros int64
}

// AppendSegmentHeader appends the 32-byte encoding of h to b.
func AppendSegmentHeader(b []byte, h SegmentHeader) []byte {
	var buf [SegmentHeaderBytes]byte
	putSegmentHeader(buf[:], h)
	return append(b, buf[:]...)
}

func putSegmentHeader(b []byte, h SegmentHeader) {
	_ = b[SegmentHeaderBytes-1]
	be.PutUint32(b[0:], SegmentMagic)
	be.PutUint16(b[4:], FormatVersion)
	be.PutUint16(b[6:], 0)
	be.PutUint64(b[8:], h.BaseOffset)
	be.PutUint64(b[16:], uint64(h.CreatedAtMicros))
	be.PutUint32(b[24:], crc32.ChecksumIEEE(b[0:24]))
	be.PutUint32(b[28:], 0)
}

// parseSegmentHeader decodes and validates a segment header. The error kind
// says which check failed; the caller adds the path.
func parseSegmentHeader(b []byte) (SegmentHeader, CorruptionKind, string) {
	if len(b) < SegmentHeaderBytes {
		return SegmentHeader{}, KindTruncated, fmt.Sprintf("segment header needs %d bytes, file has %d", SegmentHeaderBytes, len(b))
	}
	if m := be.Uint32(b[0:]); m != SegmentMagic {
		return SegmentHeader{}, KindSegmentMagic, fmt.Sprintf("magic %#08x, want %#08x", m, SegmentMagic)
	}
	if v := be.Uint16(b[4:]); v != FormatVersion {
		return SegmentHeader{}, KindSegmentVersion, fmt.Sprintf("version %d, want %d", v, FormatVersion)
	}
	if f := be.Uint16(b[6:]); f != 0 {
		return SegmentHeader{}, KindSegmentFlags, fmt.Sprintf("flags %#04x", f)
	}
	if got, want := be.Uint32(b[24:]), crc32.ChecksumIEEE(b[0:24]); got != want {
		return SegmentHeader{}, KindSegmentHeaderChecksum, fmt.Sprintf("crc %#08x, computed %#08x", got, want)
	}
	return SegmentHeader{BaseOffset: be.Uint64(b[8:]), CreatedAtMicros: int64(be.Uint64(b[16:]))}, "", ""
}

// Record is one decoded record. Payload aliases the buffer it was decoded
// from; see the lifetime rules of the API that returned it.
type Record struct {
	Offset          uint64
	TimestampMicros int64
	Payload         []byte
}

// RecordSize is the number of bytes a record with an n-byte payload takes.
func RecordSize(n int) int { return RecordHeaderBytes + n }

// AppendRecord appends the encoding of one record to b.
func AppendRecord(b []byte, offset uint64, ts int64, payload []byte) []byte {
	n := len(b)
	b = append(b, make([]byte, RecordHeaderBytes)...)
	b = append(b, payload...)
	putRecordHeader(b[n:], offset, ts, payload)
	return b
}

// putRecordHeader writes the 28-byte header for payload into b[:28]. The
// payload itself is checksummed from the caller's slice, which is warm in
// cache, not from b.
func putRecordHeader(b []byte, offset uint64, ts int64, payload []byte) {
	_ = b[RecordHeaderBytes-1]
	be.PutUint32(b[0:], uint32(len(payload)))
	be.PutUint64(b[4:], offset)
	be.PutUint64(b[12:], uint64(ts))
	be.PutUint32(b[20:], crc32.ChecksumIEEE(b[0:20]))
	c := crc32.Update(0, crc32.IEEETable, b[0:24])
	be.PutUint32(b[24:], crc32.Update(c, crc32.IEEETable, payload))
}

// recordHeader is a record header whose own CRC has been checked.
type recordHeader struct {
	length   uint32
	offset   uint64
	ts       int64
	checksum uint32
}

// decodeVerdict says why a record at a position did not decode.
type decodeVerdict uint8

const (
	decodeOK          decodeVerdict = iota
	decodeShortHeader               // fewer than 28 bytes left
	decodeHeaderCRC                 // header CRC mismatch
	decodeTooLarge                  // payload_len over MaxPayloadBytes
	decodeShortRecord               // payload runs past the end of b
	decodePayloadCRC                // record checksum mismatch
)

// decodeRecordHeader checks the header at b[0:28].
func decodeRecordHeader(b []byte) (recordHeader, decodeVerdict) {
	if len(b) < RecordHeaderBytes {
		return recordHeader{}, decodeShortHeader
	}
	if be.Uint32(b[20:]) != crc32.ChecksumIEEE(b[0:20]) {
		return recordHeader{}, decodeHeaderCRC
	}
	h := recordHeader{
		length:   be.Uint32(b[0:]),
		offset:   be.Uint64(b[4:]),
		ts:       int64(be.Uint64(b[12:])),
		checksum: be.Uint32(b[24:]),
	}
	if h.length > MaxPayloadBytes {
		return h, decodeTooLarge
	}
	return h, decodeOK
}

// decodeRecord decodes and fully verifies the record at the start of b.
func decodeRecord(b []byte) (recordHeader, []byte, decodeVerdict) {
	h, v := decodeRecordHeader(b)
	if v != decodeOK {
		return h, nil, v
	}
	end := RecordHeaderBytes + int64(h.length)
	if end > int64(len(b)) {
		return h, nil, decodeShortRecord
	}
	payload := b[RecordHeaderBytes:end]
	c := crc32.Update(0, crc32.IEEETable, b[0:24])
	if crc32.Update(c, crc32.IEEETable, payload) != h.checksum {
		return h, nil, decodePayloadCRC
	}
	return h, payload, decodeOK
}

// DecodeRecord decodes and verifies one record at the start of b and returns
// it with the number of bytes it takes. The payload aliases b.
func DecodeRecord(b []byte) (Record, int, error) {
	h, payload, v := decodeRecord(b)
	if v != decodeOK {
		return Record{}, 0, &CorruptionError{Kind: v.kind(), Detail: v.detail(h, len(b))}
	}
	return Record{Offset: h.offset, TimestampMicros: h.ts, Payload: payload}, RecordHeaderBytes + len(payload), nil
}

func (v decodeVerdict) kind() CorruptionKind {
	switch v {
	case decodeShortHeader, decodeShortRecord:
		return KindTruncated
	case decodeHeaderCRC:
		return KindRecordHeaderChecksum
	case decodeTooLarge:
		return KindRecordTooLarge
	case decodePayloadCRC:
		return KindRecordChecksum
	}
	return ""
}

func (v decodeVerdict) detail(h recordHeader, avail int) string {
	switch v {
	case decodeShortHeader:
		return fmt.Sprintf("needed %d bytes, available %d", RecordHeaderBytes, avail)
	case decodeShortRecord:
		return fmt.Sprintf("needed %d bytes, available %d", RecordHeaderBytes+int64(h.length), avail)
	case decodeTooLarge:
		return fmt.Sprintf("payload_len %d over %d", h.length, MaxPayloadBytes)
	}
	return ""
}

// IndexEntry maps a record offset to its byte position in the segment.
type IndexEntry struct {
	Offset   uint64
	Position uint64
}

func putIndexHeader(b []byte, base uint64) {
	_ = b[IndexHeaderBytes-1]
	be.PutUint32(b[0:], IndexMagic)
	be.PutUint16(b[4:], FormatVersion)
	be.PutUint16(b[6:], 0)
	be.PutUint64(b[8:], base)
	be.PutUint64(b[16:], 0)
}

// encodeIndex returns the bytes of an index file.
func encodeIndex(base uint64, entries []IndexEntry) []byte {
	b := make([]byte, IndexHeaderBytes+IndexEntryBytes*len(entries))
	putIndexHeader(b, base)
	p := b[IndexHeaderBytes:]
	for i, e := range entries {
		be.PutUint64(p[i*IndexEntryBytes:], e.Offset)
		be.PutUint64(p[i*IndexEntryBytes+8:], e.Position)
	}
	return b
}

// parseIndex decodes an index file. It reports ok=false for anything but a
// well-formed header for base; a torn final entry is dropped. Entries are
// hints: the caller checks each against the segment.
func parseIndex(b []byte, base uint64) ([]IndexEntry, bool) {
	if len(b) < IndexHeaderBytes || be.Uint32(b[0:]) != IndexMagic ||
		be.Uint16(b[4:]) != FormatVersion || be.Uint16(b[6:]) != 0 || be.Uint64(b[8:]) != base {
		return nil, false
	}
	p := b[IndexHeaderBytes:]
	entries := make([]IndexEntry, 0, len(p)/IndexEntryBytes)
	for len(p) >= IndexEntryBytes {
		entries = append(entries, IndexEntry{Offset: be.Uint64(p[0:]), Position: be.Uint64(p[8:])})
		p = p[IndexEntryBytes:]
	}
	return entries, true
}

func crcIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
