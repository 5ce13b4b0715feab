package broker

import (
	"bytes"
	"fmt"
	"time"

	"github.com/felixmq/felix/segment"
)

// Idempotent producers on a replicated shard. The leader decides a batch
// against its table and records it as proposed (offsets pending) in one
// step with the proposal, so the table's order is raft's order and the
// lock is never held while raft works. The table is the replica log's own
// when this replica became the leader (raft's leader completeness: every
// batch any leader committed is in it) plus what it proposed since; a
// proposal that failed before it had offsets, or a new leadership, makes
// the next batch rebuild it from the log, once no proposal of the old one
// is unanswered.

// publishIdempotent decides and proposes one idempotent batch.
func (r *replicated) publishIdempotent(a idemArgs, payloads [][]byte, meta *batchMeta, done func(uint64, error)) {
	sh, id := r.sh, &r.sh.idem
	id.mu.Lock()
	if err := r.currentTableLocked(); err != nil {
		id.mu.Unlock()
		done(0, err)
		return
	}
	d := id.table.decide(a.producer, a.sequence)
	if d.verdict != verdictAppend {
		id.mu.Unlock()
		if d.verdict == verdictDuplicate {
			sh.answerDuplicate(d.batch, a, payloads, done)
			return
		}
		done(0, sh.refuse(d, a))
		return
	}
	n := uint32(len(payloads))
	pl := &placement{done: make(chan struct{})}
	id.table.record(a.producer, a.sequence, batchRef{count: n, held: n, pending: pl})
	id.inflight++
	hook := &appendHook{mark: segment.BatchMark{ProducerID: a.producer, Sequence: a.sequence}, appended: func(base uint64) {
		pl.first = base
		close(pl.done)
	}}
	r.publish(payloads, meta, hook, func(base uint64, err error) {
		id.mu.Lock()
		id.inflight--
		select {
		case <-pl.done:
		default: // never placed: the table holds a batch the log does not
			pl.err = err
			close(pl.done)
			id.stale = true
		}
		id.mu.Unlock()
		done(base, err)
	})
	id.mu.Unlock()
}

// currentTableLocked makes the shard's table the leader's: rebuilt from
// the log after a leadership change or a failed proposal, once nothing
// proposed before is unanswered (until then the batch is refused, to be
// sent again).
func (r *replicated) currentTableLocked() error {
	id := &r.sh.idem
	epoch := id.epoch.Load()
	if id.table != nil && id.built == epoch && !id.stale {
		return nil
	}
	if id.inflight > 0 {
		return fmt.Errorf("%w: shard %s: producer state is being rebuilt after a leadership change; send again",
			ErrOwnerUnavailable, r.shard())
	}
	start, from := time.Now(), id.baseTo
	t, walked, err := id.extendLocked(r.log, r.group.Status().Commit)
	if err != nil {
		return fmt.Errorf("producer state of %s shard %d: %w", r.sh.st.spec.StreamKey, r.sh.id, err)
	}
	if walked > 0 {
		r.sh.b.log.Info("producer state rebuilt from the log", "stream", r.sh.st.spec.String(), "shard", r.sh.id,
			"from", from, "batches_read", walked, "producers", t.len(), "took", time.Since(start))
	}
	id.table, id.built, id.stale = t, epoch, false
	return nil
}

// prebuildProducers reads the committed batches of a replica just opened
// into its shard's producer-table base, off the publish lock, so that its
// first leadership reads only the batches after them instead of the whole
// log. It gives up when the replica closes, and keeps nothing if a
// leadership's rebuild built a base first.
func (r *replicated) prebuildProducers() {
	defer close(r.prebuilt)
	start, t, to := time.Now(), newProducerTable(), r.log.First()
	_, read, err := readProducers(r.log, t, &to, r.group.Status().Commit, false, r.closing.Load)
	if err != nil || r.closing.Load() || read == 0 {
		return
	}
	id := &r.sh.idem
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.base != nil {
		return
	}
	t.forgetBelow(r.log.First())
	id.base, id.baseTo = t, to
	r.sh.b.log.Info("producer state read from the log", "stream", r.sh.st.spec.String(), "shard", r.sh.id,
		"batches_read", read, "producers", t.len(), "took", time.Since(start))
}

// extendLocked is the producer table of log, whose records below commit
// are committed: id.base extended with the committed batches since
// id.baseTo, and a copy of it with the rest. So each batch is read once by
// the rebuilds of a replica that stays up, and a new leadership reads only
// what came since the last one (a whole-log walk under the publish lock
// grew with the log: ~0.36 s per GiB of 256 B records); walked counts the
// batches read.
func (id *idempotence) extendLocked(log *segment.Log, commit uint64) (t *producerTable, walked int, err error) {
	if id.base == nil {
		id.base, id.baseTo = newProducerTable(), log.First()
	}
	return readProducers(log, id.base, &id.baseTo, commit, true, nil)
}

// readProducers walks the batches of log that open at or after *from. Those
// that end below commit, up to the first that does not, go into base, and
// *from moves past each: raft never truncates committed entries, so base
// stays true. With rest, the batches from that first one on go into a copy
// of base, which is returned (a copy also when there are none); without,
// the walk ends there and t is nil. stop, if set, ends the walk early. read
// counts the batches recorded.
func readProducers(log *segment.Log, base *producerTable, from *uint64, commit uint64, rest bool, stop func() bool) (t *producerTable, read int, err error) {
	err = log.Batches(*from, func(b segment.MarkedBatch) bool {
		if stop != nil && stop() {
			return false
		}
		ref := batchRef{first: b.First, count: b.Len, held: b.Held}
		switch {
		case t == nil && b.First+uint64(b.Len) <= commit:
			base.record(b.ProducerID, b.Sequence, ref)
			*from = b.First + 1
		case !rest:
			return false
		default:
			if t == nil {
				t = base.clone()
			}
			t.record(b.ProducerID, b.Sequence, ref)
		}
		read++
		return true
	})
	if err == nil && rest && t == nil {
		t = base.clone()
	}
	return t, read, err
}

// answerDuplicate answers a re-send of a batch this leader's table holds:
// once the batch has offsets and counts per the ack mode, with its first
// offset if it holds the same payloads (else sequence_reused, for a client
// that knows it). The payloads are compared once the batch is in the log,
// after the caller's frame buffer (which they alias) is reused: they are
// copied (re-sends are rare).
func (r *replicated) answerDuplicate(b batchRef, a idemArgs, payloads [][]byte, done func(uint64, error)) {
	own := make([][]byte, len(payloads))
	for i, p := range payloads {
		own[i] = bytes.Clone(p)
	}
	r.answerDuplicateOwned(b, a, own, done)
}

func (r *replicated) answerDuplicateOwned(b batchRef, a idemArgs, payloads [][]byte, done func(uint64, error)) {
	first, known := b.placed()
	if !known && b.pending != nil {
		go func() {
			select {
			case <-b.pending.done:
			case <-time.After(r.sh.b.cfg.QuorumTimeout):
			}
			if first, known := b.placed(); known {
				b.first, b.pending = first, nil
				r.answerDuplicateOwned(b, a, payloads, done)
				return
			}
			done(0, fmt.Errorf("%w: shard %s: the batch's first send was not placed; send again", ErrOwnerUnavailable, r.shard()))
		}()
		return
	}
	b.first, b.pending = first, nil
	r.whenCommitted(b.first+uint64(b.count), func(err error) {
		if err != nil {
			done(0, err)
			return
		}
		same, err := r.sh.sameBatch(b, payloads)
		switch {
		case err != nil:
			done(0, err)
		case !same && a.reusedRefusal:
			done(0, reusedRefusal(r.sh, a))
		default:
			done(b.first, nil)
		}
	})
}
