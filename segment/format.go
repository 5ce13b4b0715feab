package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
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
	// (MarkGeneration, kind bit 29): a replicated shard's log
	// (Config.FormatVersion) writes every segment at v4 or later, as the
	// published Felix's logs do once they hold one.
	FormatVersionV4 uint16 = 4
	// FormatVersionPublisher is the published format v6: records may end
	// with the principal that published them (kind bit 27). A segment is
	// written at it only to hold such a record.
	FormatVersionPublisher uint16 = 6
	// FormatVersionHeaders (Felix-Go, 0x8006) is v6 plus records whose
	// body ends with event headers (kind bit 26, which shortens the
	// length field to 26 bits). The high bit marks a version of our own:
	// the published Felix refuses every version it does not know, so it
	// never misreads one. A segment is written at it only to hold such a
	// record.
	FormatVersionHeaders uint16 = 0x8006
	SegmentHeaderBytes          = 32
	RecordHeaderBytes           = 28
	// TagBytes is the producer tag after the header of a record that opens
	// a marked batch: producer_id u64, sequence u64, len u32.
	TagBytes         = 20
	IndexHeaderBytes = 24
	IndexEntryBytes  = 16
	// MaxPayloadBytes is the largest payload a record may carry.
	MaxPayloadBytes = 64 << 20
)

// The top bits of a v3+ record's payload_len are its kind; the low 27 (26
// in a FormatVersionHeaders segment) are the length of its body.
const (
	lengthMask    uint32 = 1<<27 - 1
	kindOpens     uint32 = 1 << 31 // opens a marked batch; the tag follows the header
	kindContinues uint32 = 1 << 30 // continues the batch of the previous record
	// kindGeneration (v4): a generation-start record, not an event. Bit
	// 28 is the published v5's commit kind, which this build neither
	// writes nor reads.
	kindGeneration uint32 = 1 << 29
	// kindPublisher (v6): the body ends with publisher ‖ u8 len.
	kindPublisher uint32 = 1 << 27
	// kindHeaders (FormatVersionHeaders): the body ends with the event
	// headers ‖ u16 len, before the publisher if any.
	kindHeaders uint32 = 1 << 26
	// MaxPublisherBytes bounds a record's publisher (a u8 length).
	MaxPublisherBytes = 255
	// MaxHeadersBytes bounds a record's headers block (a u16 length).
	MaxHeadersBytes = 1<<16 - 1
)

// knownVersion reports whether this package reads segments of version v.
func knownVersion(v uint16) bool {
	return v == FormatVersionV2 || v == FormatVersion || v == FormatVersionV4 || v == FormatVersionPublisher || v == FormatVersionHeaders
}

// kindsOf are the kind bits a segment of version may hold, and the mask of
// the body length.
func kindsOf(version uint16) (kinds, length uint32) {
	switch version {
	case FormatVersionV2:
		return 0, 1<<32 - 1
	case FormatVersion:
		return kindOpens | kindContinues, lengthMask
	case FormatVersionV4:
		return kindOpens | kindContinues | kindGeneration, lengthMask
	case FormatVersionPublisher:
		return kindOpens | kindContinues | kindGeneration | kindPublisher, lengthMask
	}
	return kindOpens | kindContinues | kindGeneration | kindPublisher | kindHeaders, lengthMask >> 1
}

// maxBody is the largest record body a segment of version holds.
func maxBody(version uint16) int64 {
	_, length := kindsOf(version)
	return min(int64(length), MaxPayloadBytes)
}

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
	if !knownVersion(v) {
		return SegmentHeader{}, KindSegmentVersion, fmt.Sprintf("version %d, want %d, %d, %d, %d or %#04x", v,
			FormatVersionV2, FormatVersion, FormatVersionV4, FormatVersionPublisher, FormatVersionHeaders)
	}
	if f := be.Uint16(b[6:]); f != 0 {
		return SegmentHeader{}, KindSegmentFlags, fmt.Sprintf("flags %#04x", f)
	}
	if got, want := be.Uint32(b[24:]), crc32.ChecksumIEEE(b[0:24]); got != want {
		return SegmentHeader{}, KindSegmentHeaderChecksum, fmt.Sprintf("crc %#08x, computed %#08x", got, want)
	}
	return SegmentHeader{Version: v, BaseOffset: be.Uint64(b[8:]), CreatedAtMicros: int64(be.Uint64(b[16:]))}, "", ""
}

// Record is one decoded record. Payload, Publisher and Headers alias the
// buffer it was decoded from; see the lifetime rules of the API that
// returned it.
type Record struct {
	Offset          uint64
	TimestampMicros int64
	Payload         []byte
	// Mark is the record's idempotent producer mark (format v3).
	Mark Mark
	// Publisher is the principal that published the record (v6), nil
	// when none was stored.
	Publisher []byte
	// Headers is the record's event header block (FormatVersionHeaders),
	// nil when it has none. The log keeps it as opaque bytes; the broker
	// gives it its layout.
	Headers []byte
}

// body is the record's body as the format lays it out.
func (r Record) body() body {
	return body{payload: r.Payload, headers: r.Headers, publisher: r.Publisher}
}

// body is what follows a record's header and tag: the payload, then the
// headers block and its u16 length when there are headers, then the
// publisher and its u8 length when there is one.
type body struct {
	payload, headers, publisher []byte
}

func (b body) len() int {
	n := len(b.payload)
	if b.headers != nil {
		n += len(b.headers) + 2
	}
	if b.publisher != nil {
		n += len(b.publisher) + 1
	}
	return n
}

func (b body) kindBits() uint32 {
	var k uint32
	if b.headers != nil {
		k |= kindHeaders
	}
	if b.publisher != nil {
		k |= kindPublisher
	}
	return k
}

// put writes the body into dst, which has room for it.
func (b body) put(dst []byte) {
	n := copy(dst, b.payload)
	if b.headers != nil {
		n += copy(dst[n:], b.headers)
		be.PutUint16(dst[n:], uint16(len(b.headers)))
		n += 2
	}
	if b.publisher != nil {
		n += copy(dst[n:], b.publisher)
		dst[n] = byte(len(b.publisher))
	}
}

func (b body) crc(c uint32) uint32 {
	c = crc32.Update(c, crc32.IEEETable, b.payload)
	if b.headers != nil {
		c = crc32.Update(c, crc32.IEEETable, b.headers)
		c = crcUpdateBE(c, uint32(len(b.headers)), 2)
	}
	if b.publisher != nil {
		c = crc32.Update(c, crc32.IEEETable, b.publisher)
		c = crcUpdateBE(c, uint32(len(b.publisher)), 1)
	}
	return c
}

// split takes the trailers of kind off a record's body; false when a
// length byte claims more than the body holds.
func split(raw []byte, kind uint32) (body, bool) {
	var b body
	if kind&kindPublisher != 0 {
		if len(raw) < 1 || int(raw[len(raw)-1]) > len(raw)-1 {
			return b, false
		}
		m := int(raw[len(raw)-1])
		b.publisher = raw[len(raw)-1-m : len(raw)-1 : len(raw)-1]
		raw = raw[:len(raw)-1-m]
	}
	if kind&kindHeaders != 0 {
		if len(raw) < 2 || int(be.Uint16(raw[len(raw)-2:])) > len(raw)-2 {
			return b, false
		}
		n := int(be.Uint16(raw[len(raw)-2:]))
		b.headers = raw[len(raw)-2-n : len(raw)-2 : len(raw)-2]
		raw = raw[:len(raw)-2-n]
	}
	b.payload = raw[:len(raw):len(raw)]
	return b, true
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
	return appendRecord(b, offset, ts, m, body{payload: payload})
}

// AppendFullRecord appends the encoding of r, with its publisher (nil:
// none) and headers (nil: none), at r.Offset, r.TimestampMicros, r.Mark.
func AppendFullRecord(b []byte, r Record) []byte {
	return appendRecord(b, r.Offset, r.TimestampMicros, r.Mark, body{payload: r.Payload, headers: r.Headers, publisher: r.Publisher})
}

func appendRecord(b []byte, offset uint64, ts int64, m Mark, bd body) []byte {
	n, size := len(b), RecordHeaderBytes+m.tagLen()+bd.len()
	// Grown, not appended zeros: putRecord writes every byte, and zeroing
	// them first was a pass over each staged byte of fd mode's writes.
	b = slices.Grow(b, size)[:n+size]
	putRecord(b[n:], offset, ts, m, bd)
	return b
}

// putRecord writes a whole record into b, which has room for it: the body
// first, then the header, whose CRC word is stored last. In a mapping that
// order is what recovery relies on: a writer killed mid-copy leaves a header
// whose CRC word is still zero (a torn tail, whatever the body holds), never
// a committed header over a body still being copied.
func putRecord(b []byte, offset uint64, ts int64, m Mark, bd body) {
	bd.put(b[RecordHeaderBytes+m.tagLen():])
	putRecordHeader(b, offset, ts, m, bd)
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

// putRecordHeader writes the 28-byte header for bd, and the tag of a
// record that opens a batch, into b, the header CRC word last. The body
// itself is checksummed from the caller's slices, which are warm in cache,
// not from b.
func putRecordHeader(b []byte, offset uint64, ts int64, m Mark, bd body) {
	_ = b[RecordHeaderBytes-1]
	be.PutUint32(b[0:], uint32(bd.len())|m.kindBits()|bd.kindBits())
	be.PutUint64(b[4:], offset)
	be.PutUint64(b[12:], uint64(ts))
	h := crc32.ChecksumIEEE(b[0:20])
	c := crcUpdateBE(h, h, 4)
	if m.Kind == MarkOpens {
		tag := b[RecordHeaderBytes : RecordHeaderBytes+TagBytes]
		be.PutUint64(tag[0:], m.ProducerID)
		be.PutUint64(tag[8:], m.Sequence)
		be.PutUint32(tag[16:], m.Len)
		c = crc32.Update(c, crc32.IEEETable, tag)
	}
	be.PutUint32(b[24:], bd.crc(c))
	be.PutUint32(b[20:], h) // the commit word: recovery reads a zero one as unfinished
}

// crcUpdateBE is crc32.Update(c, crc32.IEEETable, the n low bytes of v,
// big-endian) without a slice: one passed to crc32.Update escapes to the
// heap (its implementation is picked at run time), which cost an
// allocation per record appended.
func crcUpdateBE(c, v uint32, n int) uint32 {
	c = ^c
	for i := n - 1; i >= 0; i-- {
		c = crc32.IEEETable[byte(c)^byte(v>>(8*i))] ^ (c >> 8)
	}
	return ^c
}

// recordHeader is a record header whose own CRC has been checked.
type recordHeader struct {
	length   uint32 // of the body
	kind     uint32 // the kind bits
	offset   uint64
	ts       int64
	checksum uint32
}

// size is the bytes the whole record takes: header, tag, payload.
func (h recordHeader) size() int64 {
	n := int64(RecordHeaderBytes) + int64(h.length)
	if h.kind&kindOpens != 0 {
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
	decodeBadTrailer                // a publisher or headers length past the body
)

// decodeRecordHeader checks the header at b[0:28] of a segment of version
// (v2 has no kind bits: any top bit is an oversized length; bit 26 is a
// kind only in a FormatVersionHeaders segment).
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
	kinds, length := kindsOf(version)
	h.kind, h.length = h.length&^length, h.length&length
	marks := h.kind & (kindOpens | kindContinues | kindGeneration)
	if h.kind&^kinds != 0 || marks&(marks-1) != 0 { // unknown here, or two marks at once
		return h, decodeBadKind
	}
	if h.length > MaxPayloadBytes {
		return h, decodeTooLarge
	}
	return h, decodeOK
}

// decodeRecord decodes and fully verifies the record at the start of b.
func decodeRecord(b []byte, version uint16) (recordHeader, Mark, body, decodeVerdict) {
	h, v := decodeRecordHeader(b, version)
	if v != decodeOK {
		return h, Mark{}, body{}, v
	}
	end := h.size()
	if end > int64(len(b)) {
		return h, Mark{}, body{}, decodeShortRecord
	}
	c := crc32.Update(0, crc32.IEEETable, b[0:24])
	if crc32.Update(c, crc32.IEEETable, b[RecordHeaderBytes:end]) != h.checksum {
		return h, Mark{}, body{}, decodePayloadCRC
	}
	bd, ok := split(b[end-int64(h.length):end], h.kind)
	if !ok {
		return h, Mark{}, body{}, decodeBadTrailer
	}
	return h, h.mark(b), bd, decodeOK
}

// record is the decoded record of h, m and bd.
func (h recordHeader) record(m Mark, bd body) Record {
	return Record{Offset: h.offset, TimestampMicros: h.ts, Payload: bd.payload, Mark: m, Publisher: bd.publisher, Headers: bd.headers}
}

// mark reads the record's mark; b holds at least its tag.
func (h recordHeader) mark(b []byte) Mark {
	switch {
	case h.kind&kindOpens != 0:
		tag := b[RecordHeaderBytes : RecordHeaderBytes+TagBytes]
		return Mark{Kind: MarkOpens, ProducerID: be.Uint64(tag[0:]), Sequence: be.Uint64(tag[8:]), Len: be.Uint32(tag[16:])}
	case h.kind&kindContinues != 0:
		return Mark{Kind: MarkContinues}
	case h.kind&kindGeneration != 0:
		return Mark{Kind: MarkGeneration}
	}
	return Mark{}
}

// DecodeRecord decodes and verifies one record of a current (v3 or v4)
// segment at the start of b and returns it with the number of bytes it
// takes. The payload aliases b.
func DecodeRecord(b []byte) (Record, int, error) {
	return DecodeVersionRecord(b, FormatVersion)
}

// DecodeVersionRecord is DecodeRecord for a segment of version.
func DecodeVersionRecord(b []byte, version uint16) (Record, int, error) {
	h, m, bd, v := decodeRecord(b, version)
	if v != decodeOK {
		return Record{}, 0, &CorruptionError{Kind: v.kind(), Detail: v.detail(h, len(b))}
	}
	return h.record(m, bd), int(h.size()), nil
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
	case decodeBadTrailer:
		return KindRecordTrailer
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
	case decodeBadTrailer:
		return fmt.Sprintf("a publisher or headers length past the %d-byte body", h.length)
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
