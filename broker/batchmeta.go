package broker

import (
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// batchMeta is what a publish carries besides its payloads: each event's
// header block and the principal that published it. It rides the batch's
// buffer (fanout.Buffer.Extra) to the ring and every subscriber, and a
// durable shard stores it with the records (segment.Batch), so live
// delivery, a replay from the ring and one from the log report the same.
// A client that did not negotiate them gets the batch's bytes unchanged;
// the writer of one that did re-encodes the frame with them
// (eventWriter.annotated).
type batchMeta struct {
	headers   [][]byte // one block per event, nil for an event without; nil for none at all
	publisher string   // "" for none
}

// metaFor is the meta a publish of payloads from principal subject
// carries to a stream (nil for none). Header blocks alias the frame and
// are copied. A durable stream keeps the publisher only when the broker
// stores publishers (Config.RecordPublishers): what a durable stream
// reports is what it stored; an in-memory stream reports the publishing
// connection's principal. A principal longer than a record can hold is
// not recorded.
func (b *Broker) metaFor(durable bool, subject string, headers [][]byte) *batchMeta {
	var m batchMeta
	if (!durable || b.cfg.RecordPublishers) && len(subject) <= wire.MaxPublisherBytes {
		m.publisher = subject
	}
	m.headers = copyHeaders(headers)
	if m.publisher == "" && m.headers == nil {
		return nil
	}
	return &m
}

// copyHeaders copies the blocks that hold headers into one allocation,
// nil for an event without; nil when no event has any.
func copyHeaders(blocks [][]byte) [][]byte {
	size := 0
	for _, h := range blocks {
		if len(h) > 1 {
			size += len(h)
		}
	}
	if size == 0 {
		return nil
	}
	all := make([]byte, 0, size)
	out := make([][]byte, len(blocks))
	for i, h := range blocks {
		if len(h) > 1 {
			all = append(all, h...)
			out[i] = all[len(all)-len(h) : len(all) : len(all)]
		}
	}
	return out
}

// metaOf is the meta a buffer carries, nil for none.
func metaOf(buf *fanout.Buffer) *batchMeta {
	m, _ := buf.Extra.(*batchMeta)
	return m
}

// storedPublisher is the publisher a log record gets: nil for none.
func (m *batchMeta) storedPublisher() []byte {
	if m == nil || m.publisher == "" {
		return nil
	}
	return []byte(m.publisher)
}

func (m *batchMeta) storedHeaders() [][]byte {
	if m == nil {
		return nil
	}
	return m.headers
}
