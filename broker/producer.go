package broker

// producerTable is one shard's idempotent producer state: for each producer
// the next sequence it must send and where its last batches landed. It is a
// pure core (no lock, no clock, no I/O): the shard's idempotence lock guards
// it, appends feed it in offset order, and opening a durable shard feeds it
// the marked batches of the log in the same order (segment.Log.Batches), so
// a restarted broker decides exactly as before the crash.
//
// Design. A producer's sequences are contiguous (a batch is appended only
// as the next one), so its remembered batches are the last `held` sequences
// before next, kept in a ring indexed by sequence. Past maxProducers, the
// producer whose newest batch is the oldest is forgotten: the entries form
// a list in order of their newest batch, which appends only ever move to
// the back, so that producer is the front. Both limits are the published
// Felix's, which exposes no knob for them, and neither do we: 64 batches
// cover a client's 64-batch window of re-sends, and 4096 producers cost at
// most ~6 MiB per shard.
//
// Rejected: a digest of each batch's payloads to tell a re-send with other
// data (the published Felix keeps a CRC-64). Re-sends are rare and the
// batch is still in the log (or, on an ephemeral shard, perhaps the ring),
// so the shard compares the bytes when one arrives instead of hashing
// every batch on the publish path.
type producerTable struct {
	byID        map[uint64]*producerEntry
	front, back *producerEntry // oldest newest batch first
}

const (
	producerWindow = 64
	maxProducers   = 4096
)

type producerEntry struct {
	id         uint64
	next       uint64 // the sequence the producer must send next
	held       int    // remembered batches: sequences next-held .. next-1
	batches    [producerWindow]batchRef
	prev, succ *producerEntry
}

// batchRef is where one remembered batch landed.
type batchRef struct {
	first uint64 // offset of its first record
	count uint32 // records it declared
	held  uint32 // records of it the shard holds (count, unless another writer left it short)
	// pending, on a replicated shard, is the batch's placement while its
	// proposal has no offsets yet (first is then pending.first once
	// pending.done is closed); nil once known or elsewhere.
	pending *placement
}

// placement is a proposed batch's offsets, known once done is closed: its
// first offset, or err if it was never placed.
type placement struct {
	first uint64
	err   error
	done  chan struct{}
}

// placed reports b's first offset and whether it is known yet: a batch
// still being proposed has none, and neither has one that failed.
func (b batchRef) placed() (uint64, bool) {
	if b.pending == nil {
		return b.first, true
	}
	select {
	case <-b.pending.done:
		return b.pending.first, b.pending.err == nil
	default:
		return 0, false
	}
}

// verdict is what to do with an idempotent batch.
type verdict uint8

const (
	verdictAppend    verdict = iota // the next sequence (or a new producer's 0): append it
	verdictDuplicate                // a remembered sequence: answer with its batch, append nothing
	verdictGap                      // ahead of the next sequence (decision.expected)
	verdictExpired                  // older than the remembered window
	verdictUnknown                  // no state for the producer and not sequence 0
)

type decision struct {
	verdict  verdict
	batch    batchRef // verdictDuplicate
	expected uint64   // verdictGap
}

func newProducerTable() *producerTable {
	return &producerTable{byID: map[uint64]*producerEntry{}}
}

// decide says what to do with sequence seq of producer id.
func (t *producerTable) decide(id, seq uint64) decision {
	e := t.byID[id]
	switch {
	case e == nil && seq == 0:
		return decision{verdict: verdictAppend}
	case e == nil:
		return decision{verdict: verdictUnknown}
	case seq == e.next:
		return decision{verdict: verdictAppend}
	case seq > e.next:
		return decision{verdict: verdictGap, expected: e.next}
	case e.next-seq <= uint64(e.held):
		return decision{verdict: verdictDuplicate, batch: e.batches[seq%producerWindow]}
	}
	return decision{verdict: verdictExpired}
}

// record remembers that sequence seq of producer id landed at first. A
// sequence that does not follow the producer's last one (a rebuild from a
// log another writer left with a gap, or a producer that started again at
// 0 after it was forgotten) starts its window afresh.
func (t *producerTable) record(id, seq uint64, b batchRef) {
	e := t.byID[id]
	if e == nil {
		if len(t.byID) >= maxProducers {
			t.forget(t.front)
		}
		e = &producerEntry{id: id, next: seq}
		t.byID[id] = e
	} else {
		t.unlink(e)
	}
	if seq != e.next {
		e.next, e.held = seq, 0
	}
	e.batches[seq%producerWindow] = b
	e.next = seq + 1
	e.held = min(e.held+1, producerWindow)
	t.pushBack(e)
}

// forgetBelow drops the batches whose first record is below first (removed
// by retention), and the producers left with none.
func (t *producerTable) forgetBelow(first uint64) {
	for e := t.front; e != nil; {
		succ := e.succ
		for e.held > 0 {
			at, known := e.batches[(e.next-uint64(e.held))%producerWindow].placed()
			if !known || at >= first {
				break
			}
			e.held--
		}
		if e.held == 0 {
			t.forget(e)
		}
		e = succ
	}
}

func (t *producerTable) len() int { return len(t.byID) }

// clone is a copy of t that records into either leave the other as it was.
func (t *producerTable) clone() *producerTable {
	c := newProducerTable()
	for e := t.front; e != nil; e = e.succ {
		ce := *e
		c.byID[e.id] = &ce
		c.pushBack(&ce)
	}
	return c
}

func (t *producerTable) forget(e *producerEntry) {
	t.unlink(e)
	delete(t.byID, e.id)
}

func (t *producerTable) pushBack(e *producerEntry) {
	e.prev, e.succ = t.back, nil
	if t.back != nil {
		t.back.succ = e
	} else {
		t.front = e
	}
	t.back = e
}

func (t *producerTable) unlink(e *producerEntry) {
	if e.prev != nil {
		e.prev.succ = e.succ
	} else {
		t.front = e.succ
	}
	if e.succ != nil {
		e.succ.prev = e.prev
	} else {
		t.back = e.prev
	}
	e.prev, e.succ = nil, nil
}
