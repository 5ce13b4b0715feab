package replica

import (
	"encoding/binary"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/segment"
)

// An entry's Data for an event is the record as its leader wrote it:
//
//	u8 mark (0 none, 1 opens, 2 continues) | 0x10 with headers | 0x20 with a publisher
//	u64 timestamp (µs, big-endian)
//	[opens: u64 producer id, u64 sequence, u32 len]
//	[headers: u16 length, the header block]
//	[publisher: u8 length, the publisher]
//	payload
//
// so that a follower writes the same record. Raft's own entries (the empty
// entry of a new term, membership changes) are generation records whose
// payload is the term, then, for a membership change, the entry type
// (u8) and its encoding.
const (
	eventHead = 1 + 8
	termBytes = 8

	withHeaders   = 0x10
	withPublisher = 0x20
	markBits      = 0x0f
)

// eventData is the entry data of event record r.
func eventData(r segment.Record) []byte {
	n := eventHead + len(r.Payload) + 2 + len(r.Headers) + 1 + len(r.Publisher)
	if r.Mark.Kind == segment.MarkOpens {
		n += segment.TagBytes
	}
	b := make([]byte, eventHead, n)
	b[0] = byte(r.Mark.Kind)
	binary.BigEndian.PutUint64(b[1:], uint64(r.TimestampMicros))
	if r.Mark.Kind == segment.MarkOpens {
		b = binary.BigEndian.AppendUint64(b, r.Mark.ProducerID)
		b = binary.BigEndian.AppendUint64(b, r.Mark.Sequence)
		b = binary.BigEndian.AppendUint32(b, r.Mark.Len)
	}
	if r.Headers != nil { // at most segment.MaxHeadersBytes: the log checked it
		b[0] |= withHeaders
		b = binary.BigEndian.AppendUint16(b, uint16(len(r.Headers)))
		b = append(b, r.Headers...)
	}
	if r.Publisher != nil { // at most segment.MaxPublisherBytes
		b[0] |= withPublisher
		b = append(b, byte(len(r.Publisher)))
		b = append(b, r.Publisher...)
	}
	return append(b, r.Payload...)
}

// recordOf is the record entry e is stored as (its Offset is e's index-1).
// The payload aliases e.Data.
func recordOf(e *pb.Entry) (segment.Record, error) {
	rec := segment.Record{Offset: e.GetIndex() - 1}
	switch t := e.GetType(); {
	case t == pb.EntryType_EntryNormal && len(e.Data) == 0:
		rec.Mark = segment.Mark{Kind: segment.MarkGeneration}
		rec.Payload = binary.BigEndian.AppendUint64(nil, e.GetTerm())
		return rec, nil
	case t == pb.EntryType_EntryNormal:
		return eventRecord(rec, e.Data)
	case t == pb.EntryType_EntryConfChange || t == pb.EntryType_EntryConfChangeV2:
		rec.Mark = segment.Mark{Kind: segment.MarkGeneration}
		rec.Payload = binary.BigEndian.AppendUint64(make([]byte, 0, termBytes+1+len(e.Data)), e.GetTerm())
		rec.Payload = append(append(rec.Payload, byte(t)), e.Data...)
		return rec, nil
	default:
		return rec, fmt.Errorf("replica: entry %d of unknown type %v", e.GetIndex(), t)
	}
}

func eventRecord(rec segment.Record, d []byte) (segment.Record, error) {
	if len(d) < eventHead {
		return rec, fmt.Errorf("replica: entry %d: event data of %d bytes", rec.Offset+1, len(d))
	}
	kind, flags := segment.MarkKind(d[0]&markBits), d[0]&^markBits
	if flags&^(withHeaders|withPublisher) != 0 {
		return rec, fmt.Errorf("replica: entry %d: flags %#x", rec.Offset+1, flags)
	}
	rec.TimestampMicros = int64(binary.BigEndian.Uint64(d[1:]))
	d = d[eventHead:]
	switch kind {
	case segment.MarkNone, segment.MarkContinues:
		rec.Mark = segment.Mark{Kind: kind}
	case segment.MarkOpens:
		if len(d) < segment.TagBytes {
			return rec, fmt.Errorf("replica: entry %d: opening mark without its tag", rec.Offset+1)
		}
		rec.Mark = segment.Mark{Kind: kind, ProducerID: binary.BigEndian.Uint64(d), Sequence: binary.BigEndian.Uint64(d[8:]),
			Len: binary.BigEndian.Uint32(d[16:])}
		d = d[segment.TagBytes:]
	default:
		return rec, fmt.Errorf("replica: entry %d: mark %d", rec.Offset+1, kind)
	}
	if flags&withHeaders != 0 {
		if len(d) < 2 || len(d) < 2+int(binary.BigEndian.Uint16(d)) {
			return rec, fmt.Errorf("replica: entry %d: headers cut short", rec.Offset+1)
		}
		n := 2 + int(binary.BigEndian.Uint16(d))
		rec.Headers, d = d[2:n:n], d[n:]
	}
	if flags&withPublisher != 0 {
		if len(d) < 1 || len(d) < 1+int(d[0]) {
			return rec, fmt.Errorf("replica: entry %d: publisher cut short", rec.Offset+1)
		}
		n := 1 + int(d[0])
		rec.Publisher, d = d[1:n:n], d[n:]
	}
	rec.Payload = d
	return rec, nil
}

// continuesBatch reports whether e is an event that continues an
// idempotent producer's batch (Entries ends a read only before an entry
// that does not).
func continuesBatch(e *pb.Entry) bool {
	return e.GetType() == pb.EntryType_EntryNormal && len(e.Data) > 0 && segment.MarkKind(e.Data[0]&markBits) == segment.MarkContinues
}

// entryOf is the entry of record r of term term (from the term index).
func entryOf(r segment.Record, term uint64) (*pb.Entry, error) {
	e := &pb.Entry{Index: proto.Uint64(r.Offset + 1), Term: proto.Uint64(term)}
	if r.Mark.Kind != segment.MarkGeneration {
		e.Type = pb.EntryType_EntryNormal.Enum()
		e.Data = eventData(r)
		return e, nil
	}
	p := r.Payload
	if len(p) < termBytes {
		return nil, fmt.Errorf("replica: generation record %d of %d bytes", r.Offset, len(p))
	}
	if len(p) == termBytes {
		e.Type = pb.EntryType_EntryNormal.Enum() // the empty entry of a term
		return e, nil
	}
	t := pb.EntryType(p[termBytes])
	if t != pb.EntryType_EntryConfChange && t != pb.EntryType_EntryConfChangeV2 {
		return nil, fmt.Errorf("replica: generation record %d: entry type %d", r.Offset, t)
	}
	e.Type = t.Enum()
	e.Data = append([]byte(nil), p[termBytes+1:]...)
	return e, nil
}

// termOfRecord is the term a generation record starts (its payload's
// first 8 bytes).
func termOfRecord(r segment.Record) (uint64, bool) {
	if r.Mark.Kind != segment.MarkGeneration || len(r.Payload) < termBytes {
		return 0, false
	}
	return binary.BigEndian.Uint64(r.Payload), true
}
