package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Format constants (docs/storage-format.md). All integers are big-endian.
const (
	SegmentMagic uint32 = 0x464C5347 // "FLSG"
	IndexMagic   uint32 = 0x464C5349 // "FLSI"
	// FormatVersion is the version of every new segment and index: format
	// v3, whose records may carry an idempotent producer's mark.
	FormatVersion uint16 = 3
	// FormatVersionV2 segments are read, and a v2 active segment is
	// appended to with unmarked records (byte-identical in v2 and v3); the
	// log rolls it before the first marked record.
	FormatVersionV2 uint16 = 2
	// FormatVersionV4 segments may also hold generation-start records
	// (MarkGeneration): a replicated shard's log (Config.FormatVersion)
	// writes every segment at v4, as the published Felix's logs do once
	// they hold one.
	FormatVersionV4    uint16 = 4
	SegmentHeaderBytes        = 32
	RecordHeaderBytes         = 28
	// TagBytes is the producer tag after the header of a record that opens
	// a marked batch: producer_id u64, sequence u64, len u32.
	TagBytes         = 20
	IndexHeaderBytes = 24
	IndexEntryBytes  = 16
	// MaxPayloadBytes is the largest payload a record may carry.
	MaxPayloadBytes = 64 << 20
)

// The top bits of a v3 record's payload_len are its kind; the low 27 are
// the length.
const (
	lengthMask     uint32 = 1<<27 - 1
	kindOpens      uint32 = 1 << 31 // opens a marked batch; the tag follows the header
	kindContinues  uint32 = 1 << 30 // continues the batch of the previous record
	kindGeneration uint32 = 1 << 29 // a generation-start record (v4): not an event
	// Bits 28 and 27 are the published format's v5-v6 kinds (commit,
	// publisher), which this build does not write or read.
)

var be = binary.BigEndian

// SegmentHeader is the first 32 bytes of a .log file. Version 0 encodes as
// FormatVersion.
type SegmentHeader struct {
	Version         uint16
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
	if h.Version == 0 {
		h.Version = FormatVersion
	}
	be.PutUint32(b[0:], SegmentMagic)
	be.PutUint16(b[4:], h.Version)
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
	v := be.Uint16(b[4:])
	if v != FormatVersion && v != FormatVersionV2 && v != FormatVersionV4 {
		return SegmentHeader{}, KindSegmentVersion, fmt.Sprintf("version %d, want %d, %d or %d", v, FormatVersionV2, FormatVersion, FormatVersionV4)
	}
	if f := be.Uint16(b[6:]); f != 0 {
		return SegmentHeader{}, KindSegmentFlags, fmt.Sprintf("flags %#04x", f)
	}
	if got, want := be.Uint32(b[24:]), crc32.ChecksumIEEE(b[0:24]); got != want {
		return SegmentHeader{}, KindSegmentHeaderChecksum, fmt.Sprintf("crc %#08x, computed %#08x", got, want)
	}
	return SegmentHeader{Version: v, BaseOffset: be.Uint64(b[8:]), CreatedAtMicros: int64(be.Uint64(b[16:]))}, "", ""
}

// Record is one decoded record. Payload aliases the buffer it was decoded
// from; see the lifetime rules of the API that returned it.
type Record struct {
	Offset          uint64
	TimestampMicros int64
	Payload         []byte
	// Mark is the record's idempotent producer mark (format v3).
	Mark Mark
}

// MarkKind says how a record belongs to an idempotent producer's batch.
type MarkKind uint8

const (
	MarkNone      MarkKind = iota // an ordinary record
	MarkOpens                     // the first record of a marked batch
	MarkContinues                 // a later record of the batch the previous record is in
	// MarkGeneration is a generation-start record (format v4): not an
	// event, skipped by every reader but replication. Its payload starts
	// with the generation (u64 BE); for a replicated shard the generation
	// is the raft term, and bytes after it, if any, are a membership
	// change (docs/storage-format.md).
	MarkGeneration
)

// Mark is a record's producer mark. ProducerID, Sequence and Len (records
// in the batch, the opening one included) are set on MarkOpens only.
type Mark struct {
	Kind       MarkKind
	ProducerID uint64
	Sequence   uint64
	Len        uint32
}

// BatchMark names an idempotent producer's batch: Append marks its first
// record MarkOpens (with the batch's length) and the others MarkContinues.
type BatchMark struct {
	ProducerID uint64
	Sequence   uint64
}

// RecordSize is the number of bytes an unmarked record with an n-byte
// payload takes (a record opening a marked batch takes TagBytes more).
func RecordSize(n int) int { return RecordHeaderBytes + n }

// AppendRecord appends the encoding of one unmarked record to b.
func AppendRecord(b []byte, offset uint64, ts int64, payload []byte) []byte {
	return AppendMarkedRecord(b, offset, ts, Mark{}, payload)
}

// AppendMarkedRecord appends the encoding of one record with mark m.
func AppendMarkedRecord(b []byte, offset uint64, ts int64, m Mark, payload []byte) []byte {
	n := len(b)
	b = append(b, make([]byte, RecordHeaderBytes+m.tagLen())...)
	b = append(b, payload...)
	putRecordHeader(b[n:], offset, ts, m, payload)
	return b
}

func (m Mark) tagLen() int {
	if m.Kind == MarkOpens {
		return TagBytes
	}
	return 0
}

func (m Mark) kindBits() uint32 {
	switch m.Kind {
	case MarkOpens:
		return kindOpens
	case MarkContinues:
		return kindContinues
	case MarkGeneration:
		return kindGeneration
	}
	return 0
}

// IsEvent reports whether a record with this mark is an event (MarkNone,
// MarkOpens, MarkContinues) rather than a record for replication only.
func (m Mark) IsEvent() bool { return m.Kind != MarkGeneration }

// putRecordHeader writes the 28-byte header for payload, and the tag of a
// record that opens a batch, into b. The payload itself is checksummed from
// the caller's slice, which is warm in cache, not from b.
func putRecordHeader(b []byte, offset uint64, ts int64, m Mark, payload []byte) {
	_ = b[RecordHeaderBytes-1]
	be.PutUint32(b[0:], uint32(len(payload))|m.kindBits())
	be.PutUint64(b[4:], offset)
	be.PutUint64(b[12:], uint64(ts))
	be.PutUint32(b[20:], crc32.ChecksumIEEE(b[0:20]))
	c := crc32.Update(0, crc32.IEEETable, b[0:24])
	if m.Kind == MarkOpens {
		tag := b[RecordHeaderBytes : RecordHeaderBytes+TagBytes]
		be.PutUint64(tag[0:], m.ProducerID)
		be.PutUint64(tag[8:], m.Sequence)
		be.PutUint32(tag[16:], m.Len)
		c = crc32.Update(c, crc32.IEEETable, tag)
	}
	be.PutUint32(b[24:], crc32.Update(c, crc32.IEEETable, payload))
}

// recordHeader is a record header whose own CRC has been checked.
type recordHeader struct {
	length   uint32 // of the payload
	kind     uint32 // kindOpens, kindContinues or 0
	offset   uint64
	ts       int64
	checksum uint32
}

// size is the bytes the whole record takes: header, tag, payload.
func (h recordHeader) size() int64 {
	n := int64(RecordHeaderBytes) + int64(h.length)
	if h.kind == kindOpens {
		n += TagBytes
	}
	return n
}

// decodeVerdict says why a record at a position did not decode.
type decodeVerdict uint8

const (
	decodeOK          decodeVerdict = iota
	decodeShortHeader               // fewer than 28 bytes left
	decodeHeaderCRC                 // header CRC mismatch
	decodeTooLarge                  // payload_len over MaxPayloadBytes
	decodeBadKind                   // kind bits the segment's version does not define
	decodeShortRecord               // tag or payload runs past the end of b
	decodePayloadCRC                // record checksum mismatch
)

// decodeRecordHeader checks the header at b[0:28] of a segment of version
// (v2 has no kind bits: any top bit is an oversized length).
func decodeRecordHeader(b []byte, version uint16) (recordHeader, decodeVerdict) {
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
	if version >= FormatVersion {
		h.kind, h.length = h.length&^lengthMask, h.length&lengthMask
		switch h.kind {
		case 0, kindOpens, kindContinues:
		case kindGeneration:
			if version < FormatVersionV4 {
				return h, decodeBadKind
			}
		default: // a v5-v6 kind, or more than one
			return h, decodeBadKind
		}
	}
	if h.length > MaxPayloadBytes {
		return h, decodeTooLarge
	}
	return h, decodeOK
}

// decodeRecord decodes and fully verifies the record at the start of b.
func decodeRecord(b []byte, version uint16) (recordHeader, Mark, []byte, decodeVerdict) {
	h, v := decodeRecordHeader(b, version)
	if v != decodeOK {
		return h, Mark{}, nil, v
	}
	end := h.size()
	if end > int64(len(b)) {
		return h, Mark{}, nil, decodeShortRecord
	}
	c := crc32.Update(0, crc32.IEEETable, b[0:24])
	if crc32.Update(c, crc32.IEEETable, b[RecordHeaderBytes:end]) != h.checksum {
		return h, Mark{}, nil, decodePayloadCRC
	}
	m := h.mark(b)
	return h, m, b[end-int64(h.length) : end], decodeOK
}

// mark reads the record's mark; b holds at least its tag.
func (h recordHeader) mark(b []byte) Mark {
	switch h.kind {
	case kindOpens:
		tag := b[RecordHeaderBytes : RecordHeaderBytes+TagBytes]
		return Mark{Kind: MarkOpens, ProducerID: be.Uint64(tag[0:]), Sequence: be.Uint64(tag[8:]), Len: be.Uint32(tag[16:])}
	case kindContinues:
		return Mark{Kind: MarkContinues}
	case kindGeneration:
		return Mark{Kind: MarkGeneration}
	}
	return Mark{}
}

// DecodeRecord decodes and verifies one record of a current (v3 or v4)
// segment at the start of b and returns it with the number of bytes it
// takes. The payload aliases b.
func DecodeRecord(b []byte) (Record, int, error) {
	h, m, payload, v := decodeRecord(b, FormatVersionV4)
	if v != decodeOK {
		return Record{}, 0, &CorruptionError{Kind: v.kind(), Detail: v.detail(h, len(b))}
	}
	return Record{Offset: h.offset, TimestampMicros: h.ts, Payload: payload, Mark: m}, int(h.size()), nil
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
	case decodeBadKind:
		return KindRecordFlags
	}
	return ""
}

func (v decodeVerdict) detail(h recordHeader, avail int) string {
	switch v {
	case decodeShortHeader:
		return fmt.Sprintf("needed %d bytes, available %d", RecordHeaderBytes, avail)
	case decodeShortRecord:
		return fmt.Sprintf("needed %d bytes, available %d", h.size(), avail)
	case decodeTooLarge:
		return fmt.Sprintf("payload_len %d over %d", h.length, MaxPayloadBytes)
	case decodeBadKind:
		return fmt.Sprintf("kind bits %#08x", h.kind)
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
// hints: the caller checks each against the segment. Versions 2 to 4 share
// the layout (the published Felix writes 3 and reads 2 and 4).
func parseIndex(b []byte, base uint64) ([]IndexEntry, bool) {
	if len(b) < IndexHeaderBytes || be.Uint32(b[0:]) != IndexMagic ||
		be.Uint16(b[4:]) < 2 || be.Uint16(b[4:]) > 4 || be.Uint16(b[6:]) != 0 || be.Uint64(b[8:]) != base {
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
