package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
)

// The queue scenario: --count records of --payload bytes are published to
// a fresh durable stream of --shards shards (named for the round, so each
// shard's offsets start at 0 and nothing of an earlier round is drained;
// with several shards the publish batches go to the shards in turn), then
// --consumers members of one group drain it, each on its own connection. A
// consumer acks with AckAsync in batches (whatever arrived while it was
// acking, at most ackBatch), so acks never wait for the group position's
// fsync; once every record is acked each consumer sends one synchronous Ack
// of its last record of each shard, which the broker answers only when each
// shard's group position including everything that consumer acked is
// durable. The drain rate runs from the Consume calls to the last of those
// answers. --warmup does not apply: the drain is measured whole.
//
// Accounting: every record must be acked; a record acked twice must be
// explained by a redelivery (at-least-once), redeliveries are counted; and
// the broker's group positions, summed over the shards, must end at count.

const (
	ackBatch     = 32 // half the broker's default max_inflight (64): delivery goes on while acks travel
	publishBatch = 64
	publishDepth = 16 // acked publish batches outstanding
)

// queueState is what the consumers share.
type queueState struct {
	n            int64
	layout       shardLayout
	acks         []atomic.Uint32 // per record (layout.index): acks sent
	distinct     atomic.Int64
	redeliveries atomic.Uint64
	foreign      atomic.Uint64 // offsets past n: not this round's
	finish       chan struct{} // closed when all are acked, on a stall or on interrupt
	finishOnce   sync.Once
}

func (s *queueState) stop() { s.finishOnce.Do(func() { close(s.finish) }) }

// shardLayout says how many records the round published to each shard:
// base[i] is the index of shard i's offset 0 among all records.
type shardLayout struct {
	count []int64
	base  []int64
}

// layoutFor splits n records over shards the way publishRecords sends
// them: batches of batch records, to the shards in turn.
func layoutFor(n int64, batch, shards int) shardLayout {
	l := shardLayout{count: make([]int64, shards), base: make([]int64, shards)}
	for sent, i := int64(0), 0; sent < n; i++ {
		k := min(int64(batch), n-sent)
		l.count[i%shards] += k
		sent += k
	}
	for i := 1; i < shards; i++ {
		l.base[i] = l.base[i-1] + l.count[i-1]
	}
	return l
}

// index is r's position among all records, or -1 when r is not one of
// this round's.
func (l shardLayout) index(r client.QueueRef) int64 {
	if int(r.Shard) >= len(l.count) || int64(r.Offset) >= l.count[r.Shard] {
		return -1
	}
	return l.base[r.Shard] + int64(r.Offset)
}

// consumer is one member; its plain fields belong to its goroutine.
type consumer struct {
	id   int
	c    *client.Client
	q    *client.QueueConsumer
	last map[uint32]client.QueueRef // per shard: last record acked
	done time.Time
	err  error
}

// publishRecords publishes n records of size bytes, publishBatch per acked
// publish, and returns the ack latencies.
func publishRecords(ctx context.Context, cfg *Config, stream string) (*opHist, time.Duration, error) {
	c, err := dial(ctx, cfg, false)
	if err != nil {
		return nil, 0, fmt.Errorf("publisher: %w", err)
	}
	defer c.Close()
	p, err := c.NewPublisher(ctx, cfg.Namespace, stream)
	if err != nil {
		return nil, 0, fmt.Errorf("publisher: %w", err)
	}
	batch := publishBatchFor(cfg)
	payloads := make([][]byte, batch)
	for i := range payloads {
		payloads[i] = make([]byte, cfg.Payload)
	}
	h := &opHist{}
	start := time.Now()
	pending := make(chan *client.PendingAck, publishDepth)
	errc := make(chan error, 1)
	go func() {
		var first error
		for pa := range pending {
			if err := pa.Wait(ctx); err != nil && first == nil {
				first = err
			}
			now := time.Now()
			h.record(now.Add(-pa.Latency()), now)
		}
		errc <- first
	}()
	for sent, i := int64(0), 0; sent < cfg.Count && ctx.Err() == nil; i++ {
		n := min(int64(batch), cfg.Count-sent)
		// The payloads are copied before either returns. One shard needs
		// no shard-addressed publish (nor the broker's CapShard).
		if cfg.Shards > 1 {
			pending <- p.PublishShardAsync(uint32(i%cfg.Shards), payloads[:n])
		} else {
			pending <- p.PublishAsync(payloads[:n])
		}
		sent += n
	}
	close(pending)
	if err := <-errc; err != nil {
		return nil, 0, fmt.Errorf("publish: %w", err)
	}
	return h, time.Since(start), p.Close(ctx)
}

// publishBatchFor is the records per publish: publishBatch, or fewer so a
// batch stays within 1 MiB.
func publishBatchFor(cfg *Config) int {
	return max(1, min(publishBatch, (1<<20)/max(cfg.Payload, 1)))
}

// run receives and acks until the state finishes, then sends its final
// synchronous ack.
func (cs *consumer) run(e *scenarioEnv, s *queueState) {
	msgs := make(chan client.QueueMessage, 2*ackBatch)
	readCtx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	go func() {
		defer close(msgs)
		for {
			m, err := cs.q.Next(readCtx)
			if err != nil {
				return
			}
			select {
			case msgs <- m:
			case <-readCtx.Done():
				return
			}
		}
	}()
	batch := make([]client.QueueRef, 0, ackBatch)
	for {
		select {
		case <-s.finish:
			cs.finalAck(e)
			return
		case m, ok := <-msgs:
			if !ok {
				cs.err = errors.New("the queue stream ended")
				s.stop()
				return
			}
			batch = cs.take(s, m, batch)
			if len(batch) < ackBatch && len(msgs) > 0 {
				continue
			}
			if len(batch) > 0 {
				if cs.err = cs.q.AckAsync(batch...); cs.err != nil {
					s.stop()
					return
				}
				cs.count(s, batch)
				batch = batch[:0]
			}
		}
	}
}

// take adds m to the batch to ack (unless it is not this round's).
func (cs *consumer) take(s *queueState, m client.QueueMessage, batch []client.QueueRef) []client.QueueRef {
	if m.Redeliveries > 0 {
		s.redeliveries.Add(1)
	}
	if s.layout.index(m.Ref()) < 0 {
		s.foreign.Add(1)
		return batch
	}
	return append(batch, m.Ref())
}

// count books acks sent; the last distinct one finishes the drain.
func (cs *consumer) count(s *queueState, batch []client.QueueRef) {
	for _, r := range batch {
		if s.acks[s.layout.index(r)].Add(1) == 1 && s.distinct.Add(1) == s.n {
			s.stop()
		}
		cs.last[r.Shard] = r
	}
}

// finalAck re-acks the consumer's last record of each shard synchronously:
// acks on one stream are applied in order and each shard's group is made
// durable whole, so the answers cover every AckAsync before.
func (cs *consumer) finalAck(e *scenarioEnv) {
	if len(cs.last) > 0 {
		refs := make([]client.QueueRef, 0, len(cs.last))
		for _, r := range cs.last {
			refs = append(refs, r)
		}
		if err := cs.q.Ack(e.opCtx, refs...); err != nil && cs.err == nil {
			cs.err = fmt.Errorf("final ack: %w", err)
		}
	}
	if err := cs.q.LastError(); err != nil && cs.err == nil {
		cs.err = fmt.Errorf("an asynchronous ack was refused: %w", err)
	}
	cs.done = time.Now()
}

func queueRound(ctx context.Context, e *scenarioEnv) (ScenarioRound, error) {
	cfg := e.cfg
	release := e.bindOps(ctx)
	defer release()
	a := newAdmin(cfg)
	if a == nil {
		return ScenarioRound{}, errors.New("the queue scenario creates a fresh stream each round: pass --admin")
	}
	stream := fmt.Sprintf("lg%04x-queue-%dB", e.tag, cfg.Payload)
	spec := streamSpec{Tenant: cfg.Tenant, Namespace: cfg.Namespace, Stream: stream, Shards: cfg.Shards, Durable: true, Fsync: cfg.Fsync}
	if _, err := a.create(ctx, spec); err != nil {
		return ScenarioRound{}, err
	}
	pub, pubDur, err := publishRecords(ctx, cfg, stream)
	if err != nil {
		return ScenarioRound{}, err
	}
	cfg.logf("[round %d] published %s records of %d B to %s in %s\n", e.n, group(uint64(cfg.Count)), cfg.Payload, stream, pubDur.Round(time.Millisecond))
	s := &queueState{n: cfg.Count, layout: layoutFor(cfg.Count, publishBatchFor(cfg), cfg.Shards),
		acks: make([]atomic.Uint32, cfg.Count), finish: make(chan struct{})}
	cs := make([]*consumer, cfg.Consumers)
	defer func() {
		for _, c := range cs {
			if c != nil && c.c != nil {
				c.c.Close()
			}
		}
	}()
	// Dial first, so the drain's clock does not count TLS handshakes.
	if err := forEach(len(cs), func(i int) error {
		cs[i] = &consumer{id: i, last: map[uint32]client.QueueRef{}}
		var err error
		cs[i].c, err = dial(ctx, cfg, false)
		return err
	}); err != nil {
		return ScenarioRound{}, err
	}
	e.startClock()
	if err := forEach(len(cs), func(i int) error {
		var err error
		cs[i].q, err = cs[i].c.Consume(ctx, cfg.Namespace, stream, "loadgen", client.QueueOptions{Member: fmt.Sprintf("lg-%d", i)})
		return err
	}); err != nil {
		return ScenarioRound{}, fmt.Errorf("consume %s: %w", stream, err)
	}
	stop := e.startProgress(func() string {
		return fmt.Sprintf("acked %s of %s  redelivered %s", group(uint64(s.distinct.Load())), group(uint64(s.n)), group(s.redeliveries.Load()))
	})
	watchdog := drainWatchdog(ctx, cfg, s)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.run(e, s) }()
	}
	wg.Wait()
	watchdog()
	stop()
	r := queueResult(e, s, cs, pub, pubDur)
	if g, ok := groupCommitted(ctx, a, cfg, stream); ok {
		r.Checks = append(r.Checks, check("group position (committed offset) after the drain minus records", int64(g)-s.n, 0))
	}
	return r, nil
}

// drainWatchdog finishes the drain when ctx ends or no record was acked for
// --drain-timeout; the returned function stops it.
func drainWatchdog(ctx context.Context, cfg *Config, s *queueState) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last, lastProgress := s.distinct.Load(), time.Now()
		for {
			select {
			case <-quit:
				return
			case <-s.finish:
				return
			case <-ctx.Done():
				s.stop()
				return
			case now := <-tick.C:
				if n := s.distinct.Load(); n != last {
					last, lastProgress = n, now
				} else if now.Sub(lastProgress) >= cfg.DrainTimeout {
					s.stop()
					return
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}

func queueResult(e *scenarioEnv, s *queueState, cs []*consumer, pub *opHist, pubDur time.Duration) ScenarioRound {
	r := ScenarioRound{Counts: map[string]uint64{}}
	var end time.Time
	for _, c := range cs {
		if c.done.After(end) {
			end = c.done
		}
		if c.err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("consumer %d: %v", c.id, c.err))
		}
	}
	var dup int64
	for i := range s.acks {
		dup += int64(max(s.acks[i].Load(), 1) - 1)
	}
	redelivered := int64(s.redeliveries.Load())
	drain := OpResult{Op: "drain", Count: uint64(s.distinct.Load())}
	if d := end.Sub(e.start); d > 0 {
		drain.Seconds, drain.PerS = d.Seconds(), float64(drain.Count)/d.Seconds()
	}
	publish := OpResult{Op: fmt.Sprintf("publish (set-up, %d per ack)", publishBatchFor(e.cfg)),
		Count: uint64(s.n), Seconds: pubDur.Seconds(), PerS: float64(s.n) / pubDur.Seconds(), Latency: pub.hist.Summary()}
	r.Ops = []OpResult{drain, publish}
	r.MeasuredSeconds = drain.Seconds
	r.Checks = []Check{
		check("records never acked", s.n-s.distinct.Load(), 0),
		check("records acked twice without a redelivery", max(dup-redelivered, 0), 0),
	}
	r.Counts["published"] = uint64(s.n)
	r.Counts["redeliveries"] = uint64(redelivered)
	r.Counts["acked more than once"] = uint64(dup)
	if f := s.foreign.Load(); f > 0 {
		r.Counts["foreign records"] = f
	}
	return r
}

// groupCommitted reads the group's committed offsets from the broker's
// stats, summed over the shards (one entry each); false when unavailable.
func groupCommitted(ctx context.Context, a *admin, cfg *Config, stream string) (uint64, bool) {
	var stats struct {
		QueueGroups []struct {
			Stream    string `json:"stream"`
			Group     string `json:"group"`
			Committed uint64 `json:"committed"`
		} `json:"queue_groups"`
	}
	if err := a.get(ctx, "/debug/felix/stats", &stats); err != nil {
		return 0, false
	}
	want := cfg.Tenant + "/" + cfg.Namespace + "/" + stream
	var sum uint64
	found := false
	for _, g := range stats.QueueGroups {
		if g.Stream == want && g.Group == "loadgen" {
			sum, found = sum+g.Committed, true
		}
	}
	return sum, found
}
