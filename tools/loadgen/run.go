package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
)

// dialParallel bounds concurrent dials (each is a TLS handshake).
const dialParallel = 8

// run creates or finds the streams, then runs cfg.Repeat rounds with fresh
// connections each. A ctx that ends stops publishing early; the round still
// drains and reports (Interrupted).
func run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Tool: "felix-loadgen", Started: time.Now(), Config: reportConfig(&cfg)}
	streams, notes, err := prepareStreams(ctx, &cfg)
	if err != nil {
		return res, err
	}
	res.Streams, res.Notes = streams, notes
	for _, n := range notes {
		cfg.logf("note: %s\n", n)
	}
	for i := range cfg.Repeat {
		r, err := runRound(ctx, &cfg, streams, i+1)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i+1, err)
		}
		res.Rounds = append(res.Rounds, r)
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
	}
	res.summarize()
	return res, nil
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format, args...)
	}
}

// round is the shared state of one round.
type round struct {
	cfg     *Config
	n       int
	streams []streamInfo
	tag     uint32 // high 16 bits of this round's publisher ids
	// boundary[i] is publisher i's first measured sequence; MaxUint32
	// while it is warming up.
	boundary []atomic.Uint32

	start, warmupEnd, end time.Time // end is zero when --count bounds the run
	pubsDone              chan struct{}
	ackCtx                context.Context // bounds waiting for acks

	pubs []*pubWorker
	subs []*subWorker

	rssMax atomic.Uint64 // the broker's largest resident set seen
}

func newRound(cfg *Config, streams []streamInfo, n int) *round {
	r := &round{
		cfg: cfg, n: n, streams: streams, tag: uint32(rand.N(1 << 16)),
		boundary: make([]atomic.Uint32, cfg.Publishers), pubsDone: make(chan struct{}),
	}
	for i := range r.boundary {
		r.boundary[i].Store(math.MaxUint32)
	}
	for i := range cfg.Publishers {
		r.pubs = append(r.pubs, &pubWorker{id: i, stream: i % len(streams)})
	}
	for i := range cfg.Subscribers {
		// The first --slow subscribers are the slow ones; with several
		// streams they spread round-robin like the others.
		r.subs = append(r.subs, &subWorker{id: i, stream: i % len(streams), slow: i < cfg.Slow,
			paused: i >= cfg.Slow && i < cfg.Slow+cfg.Pause})
	}
	return r
}

func (r *round) pubID(i int) uint32 { return r.tag<<16 | uint32(i) }

func (r *round) pubIndex(id uint32) (int, bool) {
	i := int(id & 0xffff)
	return i, id>>16 == r.tag && i < len(r.pubs)
}

// quota is publisher i's share of --count.
func (r *round) quota(i int) int64 {
	n, p := r.cfg.Count, int64(r.cfg.Publishers)
	q := n / p
	if int64(i) < n%p {
		q++
	}
	return q
}

// pacing returns the interval between publisher i's batches (0: unpaced)
// and its first slot. Publishers are offset by a fraction of the interval so
// that the total stream of publishes is evenly spaced.
func (r *round) pacing(i int) (time.Duration, time.Time) {
	if r.cfg.Rate <= 0 {
		return 0, r.start
	}
	perPub := r.cfg.Rate / float64(r.cfg.Publishers)
	interval := time.Duration(float64(r.cfg.Batch) / perPub * float64(time.Second))
	return interval, r.start.Add(interval * time.Duration(i) / time.Duration(r.cfg.Publishers))
}

// runRound connects every subscriber (all subscribed before the first
// publish), then every publisher, publishes, drains and reports.
func runRound(ctx context.Context, cfg *Config, streams []streamInfo, n int) (Round, error) {
	var fl *FloorResult
	if cfg.Floor {
		var err error
		if fl, err = measureFloor(ctx, cfg); err != nil {
			return Round{}, fmt.Errorf("--floor: %w", err)
		}
		cfg.logf("[round %d] floor: bare quic-go round trip p50 %.1f µs, p99 %.1f µs\n", n, fl.P50, fl.P99)
	}
	r := newRound(cfg, streams, n)
	defer r.closeClients()
	t0 := time.Now()
	if err := r.connect(ctx); err != nil {
		return Round{}, err
	}
	subscriptions := 0
	for _, w := range r.subs {
		subscriptions += len(w.readers)
	}
	cfg.logf("[round %d] connected %s (%s) and %s in %s\n", n, plural(len(r.subs), "subscriber"),
		plural(subscriptions, "subscription"), plural(len(r.pubs), "publisher"), time.Since(t0).Round(time.Millisecond))
	adm := newAdmin(cfg)
	before := adm.shardOffsets(ctx, cfg)
	cpu0, cpuOK := adm.brokerCPU(ctx)

	// The round's clock is set before any goroutine reads it.
	r.start = time.Now()
	r.warmupEnd = r.start.Add(cfg.Warmup)
	if cfg.Count == 0 {
		r.end = r.warmupEnd.Add(cfg.Duration)
	}
	readCtx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	var readers sync.WaitGroup
	for _, w := range r.subs {
		for _, sr := range w.readers {
			readers.Add(1)
			go func() { defer readers.Done(); sr.read(readCtx, r, w) }()
		}
	}
	ackCtx, cancelAcks := context.WithCancel(context.Background())
	defer cancelAcks()
	// After an interrupt, acks get --drain-timeout to arrive.
	stopAfter := context.AfterFunc(ctx, func() { time.AfterFunc(cfg.DrainTimeout, cancelAcks) })
	defer stopAfter()
	r.ackCtx = ackCtx

	progressDone := r.startProgress()
	rssDone := adm.sampleRSS(&r.rssMax)
	var pubs sync.WaitGroup
	for _, w := range r.pubs {
		pubs.Add(1)
		go func() { defer pubs.Done(); w.run(ctx, r) }()
	}
	pubs.Wait()
	close(r.pubsDone)
	drained := r.drain()
	stopReading()
	readers.Wait()
	progressDone()
	rssDone()

	after := adm.shardOffsets(context.Background(), cfg)
	cpu1, cpuOK1 := adm.brokerCPU(context.Background())
	out := r.result(drained, ctx.Err() != nil)
	if fl != nil {
		var cpu time.Duration
		if cpuOK && cpuOK1 {
			cpu = cpu1 - cpu0
		}
		fl.compare(&out, cfg.Batch, cpu)
		out.Floor = fl
	}
	out.BrokerRSSMaxBytes = r.rssMax.Load()
	out.ShardEvents = shardDelta(before, after, streams)
	return out, nil
}

// connect dials every subscriber and subscribes it to every shard of its
// stream, then dials every publisher and opens its publisher.
func (r *round) connect(ctx context.Context) error {
	cfg := r.cfg
	err := forEach(len(r.subs), func(i int) error {
		w := r.subs[i]
		c, err := dial(ctx, cfg, w.slow)
		if err != nil {
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
		w.c = c
		st := r.streams[w.stream]
		for shard := range st.Shards {
			sctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
			sub, err := c.Subscribe(sctx, cfg.Namespace, st.Name, client.SubscribeOptions{Shard: uint32(shard)})
			cancel()
			if err != nil {
				return fmt.Errorf("subscriber %d: subscribe %s shard %d: %w", i, st.Name, shard, err)
			}
			w.readers = append(w.readers, newShardReader(shard, sub, cfg.Publishers))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return forEach(len(r.pubs), func(i int) error {
		w := r.pubs[i]
		c, err := dial(ctx, cfg, false)
		if err != nil {
			return fmt.Errorf("publisher %d: %w", i, err)
		}
		w.c = c
		pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		defer cancel()
		if cfg.Idempotent && cfg.Ack != "none" {
			opts := client.IdempotentOptions{Shard: uint32(i % max(cfg.Shards, 1)), Window: cfg.Inflight}
			w.ip, err = c.NewIdempotentPublisher(pctx, cfg.Namespace, r.streams[w.stream].Name, opts)
		} else {
			w.p, err = c.NewPublisher(pctx, cfg.Namespace, r.streams[w.stream].Name)
		}
		if err != nil {
			return fmt.Errorf("publisher %d: %w", i, err)
		}
		return nil
	})
}

// forEach runs f(0..n-1) with at most dialParallel at a time and returns
// the first error (after all started calls finished).
func forEach(n int, f func(i int) error) error {
	sem := make(chan struct{}, dialParallel)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// expected is how many events subscriber w must account for: everything
// its stream's publishers published (all subscribed before the first).
func (r *round) expected(w *subWorker) uint64 {
	var n uint64
	for _, p := range r.pubs {
		if p.stream == w.stream {
			n += p.published
		}
	}
	return n
}

// drain waits until every subscriber has delivered or been told about the
// drop of every published event (or has failed), or until no subscriber
// made progress for --drain-timeout. It returns how long it took.
func (r *round) drain() time.Duration {
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var lastTotal uint64
	lastProgress := start
	for {
		var total uint64
		done := true
		for _, w := range r.subs {
			got := w.delivered.Load() + w.dropped.Load()
			total += got
			if got < r.expected(w) && !w.failed.Load() {
				done = false
			}
		}
		now := time.Now()
		if done {
			return now.Sub(start)
		}
		if total != lastTotal {
			lastTotal, lastProgress = total, now
		} else if now.Sub(lastProgress) >= r.cfg.DrainTimeout {
			return now.Sub(start)
		}
		<-tick.C
	}
}

func (r *round) closeClients() {
	var wg sync.WaitGroup
	closeOne := func(c *client.Client) {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	for _, w := range r.subs {
		for _, sr := range w.readers {
			sr.sub.Close()
		}
		closeOne(w.c)
	}
	for _, w := range r.pubs {
		closeOne(w.c)
	}
	wg.Wait()
}
