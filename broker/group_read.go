package broker

import (
	"fmt"

	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// errRecordTrimmed: retention removed a record a group was to deliver.
var errRecordTrimmed = segment.ErrTrimmed

// recordReader reads the records a group hands out from its shard's log,
// reusing one log reader for consecutive offsets (the common case: new
// records in order). Records alias the log's mapping until the next read
// or close.
type recordReader struct {
	r *segment.Reader
}

func (rd *recordReader) read(g *groupShard, off uint64) (segment.Record, error) {
	if rd.r != nil && rd.r.Offset() != off {
		rd.close()
	}
	if rd.r == nil {
		nr, err := g.sh.durable().log.NewReader(off) // openGroup opened it
		if err != nil {
			return segment.Record{}, g.readError(off, err)
		}
		rd.r = nr
	}
	rec, err := rd.r.Next()
	if err == nil && rec.Offset != off {
		err = fmt.Errorf("%w: offset %d where %d was due", segment.ErrCorrupt, rec.Offset, off)
	}
	if err != nil {
		return segment.Record{}, g.readError(off, err)
	}
	return rec, nil
}

func (g *groupShard) readError(off uint64, err error) error {
	return g.b.checkStorage(shardName(g.key.stream, int(g.key.shard)), off,
		fmt.Errorf("queue: reading offset %d of shard %d: %w", off, g.key.shard, err))
}

func (rd *recordReader) close() {
	if rd.r != nil {
		rd.r.Close()
		rd.r = nil
	}
}

// groupRecord is rec as a group record for this client: its publisher,
// time and headers only where it negotiated them.
func (ct *control) groupRecord(t takenRec, rec segment.Record) wire.GroupRecord {
	out := wire.GroupRecord{Offset: t.offset, Payload: rec.Payload, Attempts: t.redeliveries + 1}
	if ct.features.Has(wire.FeatureGroupPublisher) && len(rec.Publisher) > 0 {
		p := string(rec.Publisher)
		out.Publisher = &p
	}
	if ct.features.Has(wire.FeatureRecordTimestamps) {
		ts := uint64(rec.TimestampMicros)
		out.TimestampMicros = &ts
	}
	if wire.Supports(ct.peer, wire.CapHeaders) {
		out.Headers = recordHeaders(rec)
	}
	return out
}

// recordHeaders are rec's event headers (validated when they were
// published), nil for none.
func recordHeaders(rec segment.Record) []wire.EventHeader {
	if rec.Headers == nil {
		return nil
	}
	hs, err := wire.ParseHeaders(rec.Headers)
	if err != nil {
		return nil
	}
	return hs
}
