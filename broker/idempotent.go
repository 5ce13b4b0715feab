package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// Idempotent producers (docs/protocol.md, "Idempotent producer"). A batch
// carries (producer id, sequence) for its shard; the shard appends it only
// as the producer's next sequence, answers a re-send of a remembered one
// with its original offset, and refuses the rest. On a durable shard the
// batch's records carry the producer's mark in the log (segment format v3),
// and opening the shard rebuilds the table from those marks, so a broker
// restarted after kill -9 answers a re-send exactly as before.

// idempotence is a shard's idempotent producer state. mu orders a
// producer's decision with its append: it is held from the decision until
// the batch has its offsets, so two sends of one sequence (a re-send racing
// the original on another connection) never both append. Lock order: mu,
// then the shard lock.
type idempotence struct {
	mu    sync.Mutex
	table *producerTable // nil until first used or rebuilt
	// A replicated shard's table is built from its replica's log when
	// the replica leads (replicated_idem.go): epoch counts leadership
	// changes, built is the epoch the table was built at, stale marks a
	// proposal that failed before it had offsets, inflight the proposals
	// not answered yet.
	epoch    atomic.Uint64
	built    uint64
	stale    bool
	inflight int
	// base is, on a replicated shard, the table of its log's batches
	// that open below baseTo, all committed: raft never truncates those,
	// so a rebuild walks only what opens from baseTo on.
	base   *producerTable
	baseTo uint64
}

func (id *idempotence) tableLocked() *producerTable {
	if id.table == nil {
		id.table = newProducerTable()
	}
	return id.table
}

// rebuild fills the table from the marked batches of d's log, before the
// shard serves anything, and lets retention prune it.
func (id *idempotence) rebuild(sh *shard, d *durable) error {
	if err := id.rebuildFrom(sh, d.log); err != nil {
		return err
	}
	d.idem = id
	return nil
}

// rebuildFrom fills the table from the marked batches of log.
func (id *idempotence) rebuildFrom(sh *shard, log *segment.Log) error {
	t, err := tableFrom(sh, log)
	if err != nil {
		return err
	}
	id.mu.Lock()
	id.table = t
	id.mu.Unlock()
	return nil
}

// tableFrom is the producer table the marked batches of log make.
func tableFrom(sh *shard, log *segment.Log) (*producerTable, error) {
	start := time.Now()
	t := newProducerTable()
	batches := 0
	err := log.Batches(log.First(), func(b segment.MarkedBatch) bool {
		t.record(b.ProducerID, b.Sequence, batchRef{first: b.First, count: b.Len, held: b.Held})
		batches++
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("producer state of %s shard %d: %w", sh.st.spec.StreamKey, sh.id, err)
	}
	if batches > 0 {
		sh.b.log.Info("producer state rebuilt from the log", "stream", sh.st.spec.String(), "shard", sh.id,
			"batches", batches, "producers", t.len(), "took", time.Since(start))
	}
	return t, nil
}

// reset forgets every producer: an ephemeral shard's new ownership.
func (id *idempotence) reset() {
	id.mu.Lock()
	id.table = nil
	id.mu.Unlock()
}

func (id *idempotence) forgetBelow(first uint64) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.table != nil {
		id.table.forgetBelow(first)
	}
	if id.base != nil {
		id.base.forgetBelow(first)
	}
}

// appendHook marks a publish as an idempotent producer's batch and records
// its offset under the shard lock as soon as it is appended.
type appendHook struct {
	mark     segment.BatchMark
	appended func(base uint64)
}

func (h *appendHook) batchMark() *segment.BatchMark {
	if h == nil {
		return nil
	}
	return &h.mark
}

// appendedLocked runs under the shard lock right after the append.
func (h *appendHook) appendedLocked(base uint64) {
	if h != nil {
		h.appended(base)
	}
}

// producerRefusal refuses an idempotent batch without writing it; it is
// answered publish_refused.
type producerRefusal struct {
	reason wire.Refusal
	msg    string
}

func (e *producerRefusal) Error() string { return e.msg }

// idemArgs is an idempotent batch's identity.
type idemArgs struct {
	producer, sequence uint64
	// reusedRefusal: the client offered wire.FeatureSequenceReused, so a
	// re-send with other data is refused sequence_reused rather than
	// answered as the original.
	reusedRefusal bool
}

// publishIdempotent appends payloads as sequence a.sequence of producer
// a.producer on this shard, or answers without appending. done gets the
// batch's first offset: the new one, or the original one for a re-send
// (once it is committed); or a *producerRefusal; or the append's error.
func (sh *shard) publishIdempotent(admit context.Context, a idemArgs, payloads [][]byte, meta *batchMeta, done func(uint64, error)) {
	if r := sh.rep.Load(); r != nil {
		r.publishIdempotent(a, payloads, meta, done)
		return
	}
	sh.idem.mu.Lock()
	t := sh.idem.tableLocked()
	d := t.decide(a.producer, a.sequence)
	if d.verdict != verdictAppend {
		sh.idem.mu.Unlock()
		if d.verdict == verdictDuplicate {
			sh.answerDuplicate(d.batch, a, payloads, done)
			return
		}
		done(0, sh.refuse(d, a))
		return
	}
	// The lock is let go as soon as the batch is recorded (under the
	// shard lock, right after its append) or the publish failed before
	// that, so that answering never happens under it.
	var once sync.Once
	unlock := func() { once.Do(sh.idem.mu.Unlock) }
	n := uint32(len(payloads))
	hook := &appendHook{mark: segment.BatchMark{ProducerID: a.producer, Sequence: a.sequence}, appended: func(base uint64) {
		t.record(a.producer, a.sequence, batchRef{first: base, count: n, held: n})
		unlock()
	}}
	sh.publish(admit, payloads, meta, hook, func(base uint64, err error) {
		unlock()
		done(base, err)
	})
	unlock()
}

// refuse is the refusal of a batch the table does not append.
func (sh *shard) refuse(d decision, a idemArgs) error {
	r := &producerRefusal{}
	switch d.verdict {
	case verdictGap:
		r.reason = wire.Refusal{Kind: wire.RefusedSequenceGap, Expected: d.expected}
		r.msg = fmt.Sprintf("sequence %d of producer %d on shard %d: expected %d", a.sequence, a.producer, sh.id, d.expected)
	case verdictExpired:
		r.reason = wire.Refusal{Kind: wire.RefusedSequenceExpired}
		r.msg = fmt.Sprintf("sequence %d of producer %d on shard %d is older than the %d batches remembered", a.sequence, a.producer, sh.id, producerWindow)
	default:
		r.reason = wire.Refusal{Kind: wire.RefusedUnknownProducer}
		r.msg = fmt.Sprintf("producer %d is unknown on shard %d (forgotten, or never seen: its first batch is sequence 0)", a.producer, sh.id)
	}
	return r
}

// answerDuplicate answers a re-send of a remembered batch: with its
// original offset, once it is committed, if it holds the same payloads.
// With other payloads it is refused sequence_reused, or, for a client that
// does not know that refusal, answered as the original and not written (as
// the published broker does).
func (sh *shard) answerDuplicate(b batchRef, a idemArgs, payloads [][]byte, done func(uint64, error)) {
	if b.held < b.count {
		done(0, &producerRefusal{reason: wire.Refusal{Kind: wire.RefusedSequenceExpired},
			msg: fmt.Sprintf("sequence %d of producer %d on shard %d is held in part (%d of %d records)", a.sequence, a.producer, sh.id, b.held, b.count)})
		return
	}
	if r := sh.rep.Load(); r != nil {
		r.answerDuplicate(b, a, payloads, done)
		return
	}
	if same, err := sh.sameBatch(b, payloads); err != nil {
		done(0, err)
		return
	} else if !same && a.reusedRefusal {
		done(0, reusedRefusal(sh, a))
		return
	}
	d := sh.durable()
	if d == nil {
		done(b.first, nil) // an ephemeral append is complete when it returns
		return
	}
	d.afterCommitted(sh, func(err error) { done(b.first, err) })
}

func reusedRefusal(sh *shard, a idemArgs) error {
	return &producerRefusal{reason: wire.Refusal{Kind: wire.RefusedSequenceReused},
		msg: fmt.Sprintf("sequence %d of producer %d on shard %d was published with other data", a.sequence, a.producer, sh.id)}
}

// sameBatch reports whether payloads are the records of b. What can no
// longer be read (trimmed by retention, or gone from an ephemeral shard's
// ring) counts as the same: the published broker, which keeps a digest,
// treats a batch without one so too.
func (sh *shard) sameBatch(b batchRef, payloads [][]byte) (bool, error) {
	if uint32(len(payloads)) != b.count {
		return false, nil
	}
	if log, err := sh.readLog(); err != nil {
		return false, err
	} else if log != nil {
		i, same := 0, true
		_, err := log.Read(b.first, math.MaxInt, func(_ uint64, _ int64, p []byte) bool {
			same = same && bytes.Equal(p, payloads[i])
			i++
			return same && i < len(payloads)
		})
		if errors.Is(err, segment.ErrTrimmed) {
			return true, nil
		}
		return same, err
	}
	return sh.sameInRing(b, payloads), nil
}

// sameInRing compares payloads with b's records in the replay ring, which
// holds each publish as one encoded batch.
func (sh *shard) sameInRing(b batchRef, payloads [][]byte) bool {
	sh.mu.Lock()
	bufs := sh.mu.ring.from(b.first)
	sh.mu.Unlock()
	defer func() {
		for _, buf := range bufs {
			buf.Release()
		}
	}()
	for _, buf := range bufs {
		if buf.BaseOffset != b.first {
			continue
		}
		var ev wire.EventBatch
		if wire.DecodeEventBatch(wire.FlagBinaryEventBatchShared|wire.FlagEventBatchOffsets, buf.B[wire.HeaderLen:], &ev) != nil {
			return true
		}
		for i, p := range ev.Payloads {
			if !bytes.Equal(p, payloads[i]) {
				return false
			}
		}
		return true
	}
	return true
}

// publishIdempotent starts an idempotent publish: unkeyed and unaddressed
// it goes to shard 0 (its sequences are per shard, so the producer must
// know where each batch goes). Only the shard's owner takes it: another
// broker refuses it not_leader, never forwards it (a forward carries no
// producer identity). Errors are returned as for publish.
func (p *publisher) publishIdempotent(k StreamKey, key []byte, shard int, payloads, headers [][]byte, a idemArgs, done func(publishResult, error)) error {
	sh, r, err := p.begin(k, key, shard, 0)
	if errors.Is(err, ErrDraining) {
		if nl := p.handedOver(k, key, shard); nl != nil {
			done(publishResult{shard: nl.shard.Shard}, nl.refusal())
			return nil
		}
	}
	if err != nil {
		return err
	}
	res := publishResult{shard: sh.id}
	if r != nil {
		if !r.self {
			addr := r.member.QUICAddr
			res.owner = &r.owner
			done(res, &producerRefusal{reason: wire.Refusal{Kind: wire.RefusedNotLeader, NodeID: r.member.ID, Addr: &addr},
				msg: notOwner(r).Error()})
			p.c.b.inflight.Add(-1)
			return nil
		}
		res.owner = &r.owner
	}
	meta := p.meta(sh.st.spec.Durable, headers)
	p.local(sh, res, payloads, true, func(res publishResult, err error) {
		var nl *notLeaderError
		if errors.As(err, &nl) {
			// A replica that lost its leadership under the batch: the
			// producer's own refusal, so it sends again to the leader.
			err = nl.refusal()
		}
		done(res, err)
	}, func(admit context.Context, done func(uint64, error)) {
		sh.publishIdempotent(admit, a, payloads, meta, done)
	})
	return nil
}

// idempotentPublish answers an idempotent batch (binary or JSON) in JSON:
// publish_ok, publish_refused or publish_error.
func (ct *control) idempotentPublish(k StreamKey, key []byte, shard int, payloads, headers [][]byte, reqID, producer, seq uint64) bool {
	reply := func(res publishResult, err error) {
		ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, ct.jsonAnswer(reqID, res, err)) })
	}
	a := idemArgs{producer: producer, sequence: seq, reusedRefusal: ct.features.Has(wire.FeatureSequenceReused)}
	if err := ct.publishIdempotent(k, key, shard, payloads, headers, a, reply); err != nil {
		reply(noShard, err)
		return !errors.Is(err, ErrForbidden)
	}
	return true
}

// producerInit answers producer_init with a fresh random id: ids from
// different brokers or restarts cannot collide, so none is remembered
// here; a producer's state begins with its first batch, sequence 0.
func (ct *control) producerInit(m *wire.ProducerInit) bool {
	var b [8]byte
	id := uint64(0)
	for id == 0 {
		rand.Read(b[:])
		id = binary.BigEndian.Uint64(b[:])
	}
	ok := &wire.ProducerInitOK{RequestID: m.RequestID, ProducerID: id}
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, ok) })
	return true
}

// streamShards answers stream_shards with the stream's width and routing,
// so that a client can hash keys to shards itself. The caller needs a right
// on the stream (publish or subscribe).
func (ct *control) streamShards(m *wire.StreamShards) bool {
	k := streamKey(m.TenantID, m.Namespace, m.Stream)
	err := ct.authorize(k.Tenant, auth.ActionPublish, streamResource(k))
	if err != nil {
		if ct.authorize(k.Tenant, auth.ActionSubscribe, streamResource(k)) == nil {
			err = nil
		}
	}
	var st *stream
	if err == nil {
		st, err = ct.c.b.streams.lookup(k)
	}
	if err != nil {
		ct.fail(err)
		return !errors.Is(err, ErrForbidden)
	}
	view := &wire.StreamShardsView{Shards: uint32(len(st.shards)), RequestID: m.RequestID}
	if st.routing != wire.RoutingModulo {
		r := st.routing.String()
		view.Routing = &r
	}
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, view) })
	return true
}

// handedOver is the refusal of an idempotent publish to a draining broker
// whose replica of the shard has handed its leadership over: not_leader
// naming the new leader, to which the producer sends at once, rather than
// draining, which it retries after a backoff. nil when there is no such
// leader.
func (p *publisher) handedOver(k StreamKey, key []byte, shard int) *notLeaderError {
	st, err := p.resolve(k, auth.ActionPublish)
	if err != nil {
		return nil
	}
	sh, err := st.pick(key, shard, 0)
	if err != nil {
		return nil
	}
	r := sh.rep.Load()
	if r == nil {
		return nil
	}
	s := r.group.Status()
	if s.Role == "leader" || s.Leader == 0 {
		return nil
	}
	m, ok := p.c.b.raft.member(s.Leader)
	if !ok {
		return nil
	}
	return &notLeaderError{shard: r.shard(), leader: m, term: s.Term}
}
