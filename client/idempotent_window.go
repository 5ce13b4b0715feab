package client

import "slices"

// idemWindow is the bookkeeping of an IdempotentPublisher, with no I/O and
// no lock of its own (the publisher's mutex guards it): the next sequence of
// each shard, the batches sent and not answered yet, the request id each
// was last sent under, and which of them must be sent again.
//
// A batch keeps its sequence for life; each send gives it a fresh request
// id, so an answer to an earlier send (overtaken by a re-send) is stale and
// ignored. Re-sends go out in sequence order per shard, which is what the
// broker needs to append them: it takes a producer's sequences only in
// order.
type idemWindow struct {
	next      map[uint32]uint64 // the next sequence of each shard
	inflight  []*idemBatch      // unanswered, in the order they were first sent
	byReq     map[uint64]*idemBatch
	nextReq   uint64
	resend    map[uint32]uint64 // shard → lowest sequence to send again
	resendAll bool              // a new connection: send every unanswered batch again
}

// idemBatch is one batch of an IdempotentPublisher.
type idemBatch struct {
	shard uint32
	seq   uint64
	key   []byte // nil: unkeyed
	// frame is the batch encoded as a binary idempotent publish: the
	// publisher's own copy of the payloads, sent as it is with the
	// request id and sequence patched in.
	frame []byte
	req   uint64 // the request id of its last send
	pa    *PendingAck
}

func newIdemWindow() idemWindow {
	return idemWindow{next: map[uint32]uint64{}, byReq: map[uint64]*idemBatch{}, resend: map[uint32]uint64{}}
}

// add takes the next sequence of shard for a new batch and gives it its
// first request id.
func (w *idemWindow) add(b *idemBatch) {
	b.seq = w.next[b.shard]
	w.next[b.shard]++
	w.inflight = append(w.inflight, b)
	w.send(b)
}

// send gives b a fresh request id; an answer to its last one is now stale.
func (w *idemWindow) send(b *idemBatch) {
	delete(w.byReq, b.req)
	w.nextReq++
	b.req = w.nextReq
	w.byReq[b.req] = b
}

// answered is the batch an answer to req is about; nil for a stale or
// unknown request id.
func (w *idemWindow) answered(req uint64) *idemBatch {
	b := w.byReq[req]
	delete(w.byReq, req)
	return b
}

// done forgets a batch the broker acknowledged (or that ended otherwise).
func (w *idemWindow) done(b *idemBatch) {
	delete(w.byReq, b.req)
	if i := slices.Index(w.inflight, b); i >= 0 {
		w.inflight = slices.Delete(w.inflight, i, i+1)
	}
}

// span is how many sequences of shard its oldest unanswered batch is
// behind the next one (0 with none unanswered).
func (w *idemWindow) span(shard uint32) uint64 {
	oldest, any := uint64(0), false
	for _, b := range w.inflight {
		if b.shard == shard && (!any || b.seq < oldest) {
			oldest, any = b.seq, true
		}
	}
	if !any {
		return 0
	}
	return w.next[shard] - oldest
}

// holds reports whether an unanswered batch of shard has sequence seq.
func (w *idemWindow) holds(shard uint32, seq uint64) bool {
	return slices.ContainsFunc(w.inflight, func(b *idemBatch) bool { return b.shard == shard && b.seq == seq })
}

// resendFrom schedules the unanswered batches of shard from sequence seq
// on to be sent again.
func (w *idemWindow) resendFrom(shard uint32, seq uint64) {
	if cur, ok := w.resend[shard]; !ok || seq < cur {
		w.resend[shard] = seq
	}
}

// due returns the batches to send again now, in order, each with a fresh
// request id, and clears the schedule.
func (w *idemWindow) due() []*idemBatch {
	var out []*idemBatch
	for _, b := range w.inflight {
		from, ok := w.resend[b.shard]
		if w.resendAll || (ok && b.seq >= from) {
			w.send(b)
			out = append(out, b)
		}
	}
	clear(w.resend)
	w.resendAll = false
	return out
}

// drain empties the window, returning the batches that were in it.
func (w *idemWindow) drain() []*idemBatch {
	out := w.inflight
	w.inflight = nil
	clear(w.byReq)
	clear(w.resend)
	return out
}

// notify wakes a goroutine waiting on c (cap 1) without blocking.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
