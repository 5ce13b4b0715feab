package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

// The watch scenario: one writer puts one key at --rate, paced, one put
// outstanding; --watchers watchers, each on its own connection, watch the
// key from before the first put. Every acked put must reach every watcher
// or be reported dropped (a gap report): unaccounted = puts − delivered −
// dropped per watcher, and must be 0, as for pubsub subscribers.
//
// Value layout (big-endian): round tag (4), sequence (4), intended put
// time in unix ns (8), the rest zero. Latency counts from the paced slot
// (no coordinated omission): a put that waits for the one before it shows
// as latency of both the put and its deliveries.

// WatcherResult is one watcher's accounting.
type WatcherResult struct {
	ID          int      `json:"id"`
	Puts        uint64   `json:"puts"`
	Delivered   uint64   `json:"delivered"`
	Dropped     uint64   `json:"dropped"`
	Gaps        uint64   `json:"gap_reports"`
	Unaccounted int64    `json:"unaccounted"`
	OutOfOrder  uint64   `json:"out_of_order"`
	Foreign     uint64   `json:"foreign,omitempty"`
	DeliveryP50 *float64 `json:"delivery_p50_us,omitempty"`
	DeliveryP99 *float64 `json:"delivery_p99_us,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// watchState is what the writer shares with the watchers.
type watchState struct {
	e        *scenarioEnv
	key      string
	puts     atomic.Uint64 // acked puts, warm-up included
	boundary atomic.Uint32 // first measured sequence; MaxUint32 while warming up
	put      opHist        // from the paced slot
	putCall  opHist        // from the call: put minus the writer's own lateness
	putErr   error
}

// watcher is one watch; its plain fields belong to its reading goroutine.
type watcher struct {
	id        int
	c         *client.Client
	w         *client.Watch
	delivered atomic.Uint64
	dropped   atomic.Uint64
	failed    atomic.Bool

	gaps, outOfOrder, foreign uint64
	lastSeq                   int64
	hist                      Histogram
	last                      time.Time
	err                       error
}

// write puts the key at --rate until the budget ends.
func (s *watchState) write(ctx context.Context, k *client.Cache) {
	e := s.e
	interval := time.Duration(float64(time.Second) / e.cfg.Rate)
	value := make([]byte, e.cfg.ValueSize)
	b := e.budget(0, 1)
	timer := time.NewTimer(0)
	defer timer.Stop()
	next := e.start
	for seq := uint32(0); ; seq++ {
		timer.Reset(time.Until(next))
		select {
		case <-timer.C:
		case <-ctx.Done():
			return
		}
		intended := next
		next = next.Add(interval)
		ok, measured := b.next(ctx, intended)
		if !ok {
			return
		}
		if measured && s.boundary.Load() == math.MaxUint32 {
			s.boundary.Store(seq) // before the first measured put leaves
		}
		binary.BigEndian.PutUint32(value[0:], e.tag)
		binary.BigEndian.PutUint32(value[4:], seq)
		binary.BigEndian.PutUint64(value[8:], uint64(intended.UnixNano()))
		called := time.Now()
		if err := k.Put(e.opCtx, s.key, value, 0); err != nil {
			if ctx.Err() == nil {
				s.putErr = fmt.Errorf("writer: put: %w", err)
			}
			return
		}
		s.puts.Add(1)
		if measured {
			done := time.Now()
			s.put.record(intended, done)
			s.putCall.record(called, done)
		}
	}
}

// read follows the watch until ctx ends or the watch fails.
func (w *watcher) read(ctx context.Context, s *watchState) {
	w.lastSeq = -1
	for {
		ev, err := w.w.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.err = err
				w.failed.Store(true)
			}
			return
		}
		now := time.Now()
		if ev.Dropped > 0 {
			w.gaps++
			w.dropped.Add(ev.Dropped)
			continue
		}
		if ev.Op != wire.CacheOpPut || len(ev.Value) < headerBytes || binary.BigEndian.Uint32(ev.Value) != s.e.tag {
			w.foreign++
			continue
		}
		seq := binary.BigEndian.Uint32(ev.Value[4:])
		if int64(seq) <= w.lastSeq {
			w.outOfOrder++
		}
		w.lastSeq = max(w.lastSeq, int64(seq))
		if seq >= s.boundary.Load() {
			w.hist.Record(now.UnixNano() - int64(binary.BigEndian.Uint64(ev.Value[8:])))
			w.last = now
		}
		w.delivered.Add(1)
	}
}

func watchRound(ctx context.Context, e *scenarioEnv) (ScenarioRound, error) {
	cfg := e.cfg
	release := e.bindOps(ctx)
	defer release()
	s := &watchState{e: e, key: fmt.Sprintf("lg%04x-watch", e.tag)}
	s.boundary.Store(math.MaxUint32)
	ws := make([]*watcher, cfg.Watchers)
	var writer *client.Client
	defer func() {
		if writer != nil {
			writer.Close()
		}
		for _, w := range ws {
			if w != nil && w.c != nil {
				w.c.Close()
			}
		}
	}()
	err := forEach(len(ws), func(i int) error {
		w := &watcher{id: i}
		ws[i] = w
		var err error
		if w.c, err = dial(ctx, cfg, false); err != nil {
			return fmt.Errorf("watcher %d: %w", i, err)
		}
		wctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		defer cancel()
		if w.w, err = w.c.Watch(wctx, cfg.Namespace, cfg.cacheName(), s.key, client.WatchOptions{}); err != nil {
			return fmt.Errorf("watcher %d: watch: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return ScenarioRound{}, err
	}
	k, err := openCache(ctx, cfg, &writer)
	if err != nil {
		return ScenarioRound{}, fmt.Errorf("writer: %w", err)
	}
	cfg.logf("[round %d] %s watching %s\n", e.n, plural(len(ws), "watcher"), s.key)
	e.startClock()
	readCtx, stopReading := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	for _, w := range ws {
		readers.Add(1)
		go func() { defer readers.Done(); w.read(readCtx, s) }()
	}
	stop := e.startProgress(func() string {
		var d, dr uint64
		for _, w := range ws {
			d, dr = d+w.delivered.Load(), dr+w.dropped.Load()
		}
		return fmt.Sprintf("puts %s  delivered %s  dropped %s", group(s.puts.Load()), group(d), group(dr))
	})
	s.write(ctx, k)
	e.draining.Store(true)
	drain := waitWatchers(cfg, s, ws)
	stopReading()
	readers.Wait()
	stop()
	r := watchResult(e, s, ws)
	r.Counts["drain ms"] = uint64(drain.Milliseconds())
	return r, nil
}

// openCache dials a connection (*c, closed by the caller, also on error)
// and opens the scenario's cache on it.
func openCache(ctx context.Context, cfg *Config, c **client.Client) (*client.Cache, error) {
	var err error
	if *c, err = dial(ctx, cfg, false); err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	k, err := (*c).OpenCache(octx, cfg.Namespace, cfg.cacheName())
	if err != nil {
		return nil, fmt.Errorf("open cache: %w", err)
	}
	return k, nil
}

// waitWatchers waits until every watcher has delivered or been told about
// the drop of every acked put (or failed), or until none made progress for
// --drain-timeout, as round.drain does for subscribers.
func waitWatchers(cfg *Config, s *watchState, ws []*watcher) time.Duration {
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var lastTotal uint64
	lastProgress := start
	puts := s.puts.Load()
	for {
		var total uint64
		done := true
		for _, w := range ws {
			got := w.delivered.Load() + w.dropped.Load()
			total += got
			done = done && (got >= puts || w.failed.Load())
		}
		now := time.Now()
		if done {
			return now.Sub(start)
		}
		if total != lastTotal {
			lastTotal, lastProgress = total, now
		} else if now.Sub(lastProgress) >= cfg.DrainTimeout {
			return now.Sub(start)
		}
		<-tick.C
	}
}

func watchResult(e *scenarioEnv, s *watchState, ws []*watcher) ScenarioRound {
	r := ScenarioRound{Counts: map[string]uint64{}}
	puts := s.puts.Load()
	var all Histogram
	var last time.Time
	var unaccounted int64
	var outOfOrder uint64
	for _, w := range ws {
		wr := WatcherResult{ID: w.id, Puts: puts, Delivered: w.delivered.Load(), Dropped: w.dropped.Load(),
			Gaps: w.gaps, OutOfOrder: w.outOfOrder, Foreign: w.foreign}
		wr.Unaccounted = int64(wr.Puts) - int64(wr.Delivered) - int64(wr.Dropped)
		if sum := w.hist.Summary(); sum != nil {
			wr.DeliveryP50, wr.DeliveryP99 = &sum.P50, &sum.P99
		}
		if w.err != nil {
			wr.Error = w.err.Error()
			r.Errors = append(r.Errors, fmt.Sprintf("watcher %d: %v", w.id, w.err))
		}
		all.Merge(&w.hist)
		if w.last.After(last) {
			last = w.last
		}
		unaccounted += absInt(wr.Unaccounted)
		outOfOrder += wr.OutOfOrder
		r.Counts["delivered"] += wr.Delivered
		r.Counts["dropped"] += wr.Dropped
		r.Counts["gap reports"] += wr.Gaps
		r.Watchers = append(r.Watchers, wr)
	}
	if s.putErr != nil {
		r.Errors = append(r.Errors, s.putErr.Error())
	}
	put := e.mergeOps("put", []*opHist{&s.put})
	del := OpResult{Op: "put→delivery", Count: all.Count(), Latency: all.Summary()}
	if d := last.Sub(e.warmupEnd); d > 0 {
		del.Seconds = d.Seconds()
		del.PerS = float64(all.Count()) / d.Seconds()
	}
	r.Ops = []OpResult{put, e.mergeOps("put call→ack", []*opHist{&s.putCall}), del}
	r.MeasuredSeconds = put.Seconds
	r.Counts["puts"] = puts
	r.Checks = []Check{
		check("unaccounted puts (Σ |puts − delivered − dropped| over watchers)", unaccounted, 0),
		check("deliveries out of order", int64(outOfOrder), 0),
	}
	return r
}
