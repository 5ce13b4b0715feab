package main

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
)

// subWorker is one subscriber: its own connection, one subscription per
// shard of its stream.
type subWorker struct {
	id      int
	stream  int // index into round.streams
	slow    bool
	paused  bool // stops reading for --pause-for, --pause-at into the measured phase
	c       *client.Client
	readers []*shardReader

	delivered atomic.Uint64 // this run's events received, all shards
	dropped   atomic.Uint64 // events the broker reported dropped, all shards
	failed    atomic.Bool   // a subscription ended with an error: nothing more will come
}

// shardReader follows one shard. Its plain fields belong to its goroutine
// until that ends.
type shardReader struct {
	shard    int
	sub      *client.Subscription
	lastSeq  []int64 // per publisher index; -1 before its first event
	measured uint64  // delivered events past their publisher's warm-up boundary
	// duplicates are sequences at or below one already seen: a record
	// delivered twice (a publisher's records are all on one shard, in
	// order, so nothing else puts a sequence back).
	duplicates uint64
	foreign    uint64 // events another writer of the stream published
	hist       Histogram
	last       time.Time // arrival of the last measured event
	err        error
}

func newShardReader(shard int, sub *client.Subscription, publishers int) *shardReader {
	sr := &shardReader{shard: shard, sub: sub, lastSeq: make([]int64, publishers)}
	for i := range sr.lastSeq {
		sr.lastSeq[i] = -1
	}
	return sr
}

// read consumes events until ctx ends or the subscription fails. Slow
// subscribers spend --slow-delay per event while publishers run, then drain
// at full speed so the accounting can complete.
func (sr *shardReader) read(ctx context.Context, r *round, w *subWorker) {
	var timer *time.Timer
	pauseAt := r.warmupEnd.Add(r.cfg.PauseAt)
	for {
		if w.paused && !pauseAt.IsZero() && !time.Now().Before(pauseAt) {
			sr.pause(ctx, pauseAt.Add(r.cfg.PauseFor))
			pauseAt = time.Time{}
		}
		ev, err := sr.sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				sr.err = err
				w.failed.Store(true)
			}
			return
		}
		if ev.Dropped > 0 {
			w.dropped.Add(ev.Dropped)
			continue
		}
		if !sr.account(r, ev.Payload, time.Now()) {
			continue
		}
		w.delivered.Add(1)
		if !w.slow {
			continue
		}
		select {
		case <-r.pubsDone:
			continue
		default:
		}
		if timer == nil {
			timer = time.NewTimer(r.cfg.SlowDelay)
		} else {
			timer.Reset(r.cfg.SlowDelay)
		}
		select {
		case <-timer.C:
		case <-r.pubsDone:
		case <-ctx.Done():
		}
	}
}

// pause stops reading until resume or until ctx ends.
func (sr *shardReader) pause(ctx context.Context, resume time.Time) {
	t := time.NewTimer(time.Until(resume))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// account checks one event's header and records its latency; false means
// the event is not this round's (another writer of the same stream).
func (sr *shardReader) account(r *round, payload []byte, now time.Time) bool {
	if len(payload) < headerBytes {
		// Nothing to check: count it, by arrival time for the rate.
		if !now.Before(r.warmupEnd) {
			sr.measured++
			sr.last = now
		}
		return true
	}
	id := binary.BigEndian.Uint32(payload[0:])
	seq := binary.BigEndian.Uint32(payload[4:])
	sent := int64(binary.BigEndian.Uint64(payload[8:]))
	pub, ok := r.pubIndex(id)
	if !ok {
		sr.foreign++
		return false
	}
	if int64(seq) <= sr.lastSeq[pub] {
		sr.duplicates++
	} else {
		sr.lastSeq[pub] = int64(seq)
	}
	if seq >= r.boundary[pub].Load() {
		sr.measured++
		sr.hist.Record(now.UnixNano() - sent)
		sr.last = now
	}
	return true
}
