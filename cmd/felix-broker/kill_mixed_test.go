package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
)

// TestKill9UnderMixedLoadKeepsEveryAck is the kill -9 scenario under mixed
// load with durable streams and caches: while the broker is killed with
// SIGKILL and restarted (same address, certificate, data directory),
//
//   - a publisher pipelines acked publishes to an on_commit stream and a
//     subscriber follows it by offset (as TestKill9UnderLoadLosesNoAckedRecord);
//   - a second publisher feeds another on_commit stream that a consumer
//     group consumes (acking each delivery asynchronously);
//   - writers put to an on_commit cache, each its own keys;
//   - writers add to counters of that cache, each its own counter.
//
// After each restart, before the next kill: the subscriber has every record
// acked before the kill, exactly once, offsets contiguous; the group has
// been delivered every job acked before the kill at least once; every
// acked put reads back with its value or a later one that was tried; and
// each counter writer, on reconnecting, reads its counter as the sum of its
// acked deltas, plus or minus the one add whose ack the kill cut off (that
// outcome is unknown to the client, may go either way, and is counted
// apart). Every acked add's reply is the exact running sum.
func TestKill9UnderMixedLoadKeepsEveryAck(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a broker process several times")
	}
	rounds := killRounds(t, 3)
	kb := newKillableBroker(t)
	kb.env = append(kb.env, "FELIX_STREAMS=t1/default/orders:1:on_commit,t1/default/jobs:1:on_commit",
		"FELIX_CACHES=t1/default/kv:on_commit")
	kb.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*20*time.Second+40*time.Second)
	defer cancel()

	m := newMixedLoad(kb)
	writeCtx, stopWriting := context.WithCancel(ctx)
	readCtx, stopReading := context.WithCancel(ctx)
	var writers, readers sync.WaitGroup
	m.start(writeCtx, readCtx, &writers, &readers)
	defer func() { stopWriting(); stopReading(); writers.Wait(); readers.Wait() }()

	for r := range rounds {
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		before := m.progress()
		orders, jobs := m.orders.snapshot(), m.jobs.snapshot()
		kb.kill(t)
		restarted := time.Now()
		kb.start(t)
		require.Eventually(t, func() bool { return m.progress().allPast(before) }, 30*time.Second, 5*time.Millisecond,
			"round %d: some load acked nothing after the restart: %v, before the kill %v", r, m.progress(), before)
		back := time.Since(restarted)
		m.sub.awaitCovers(t, kb, orders, fmt.Sprintf("round %d, records acked before the kill", r))
		require.Eventually(t, func() bool { return m.consumed.coversAll(jobs) }, 20*time.Second, 10*time.Millisecond,
			"round %d: the group was never delivered every job acked before the kill", r)
		require.NoError(t, m.checkCache(ctx), "round %d", r)
		require.NoError(t, m.failure(), "round %d", r)
		t.Logf("round %d: killed at %v; all load acked again %v after the restart; subscriber and group caught up, %d cache keys read back",
			r, before, back.Round(time.Millisecond), len(m.cache.keys()))
	}
	stopWriting()
	writers.Wait()
	m.sub.awaitCovers(t, kb, m.orders.snapshot(), "after the last restart")
	require.Eventually(t, func() bool { return m.consumed.covers(m.jobs) }, 20*time.Second, 10*time.Millisecond,
		"the group was never delivered every acked job")
	stopReading()
	readers.Wait()
	require.NoError(t, m.sub.failure(), "offsets out of order or a record delivered twice")
	require.NoError(t, m.checkCache(ctx))
	require.NoError(t, m.checkCounters(ctx))
	require.NoError(t, m.failure())
	t.Logf("%d kills: %s", rounds, m.summary())
}

// mixedLoad is the load of TestKill9UnderMixedLoadKeepsEveryAck and what it
// was acked.
type mixedLoad struct {
	kb       *killableBroker
	orders   *seqSet // acked publishes to orders
	sub      *resumer
	jobs     *seqSet // acked publishes to jobs
	consumed *seqCount
	cache    *cacheModel
	counters []*counterWriter

	mu  sync.Mutex
	err error // first violation a load goroutine found
}

const (
	mixedPutters  = 4
	mixedKeys     = 16 // per putter
	mixedCounters = 4
)

func newMixedLoad(kb *killableBroker) *mixedLoad {
	m := &mixedLoad{kb: kb, orders: &seqSet{m: map[uint64]bool{}}, sub: &resumer{seen: map[uint64]bool{}},
		jobs: &seqSet{m: map[uint64]bool{}}, consumed: &seqCount{n: map[uint64]int{}},
		cache: &cacheModel{acked: map[string]uint64{}, tried: map[string]uint64{}}}
	for i := range mixedCounters {
		m.counters = append(m.counters, &counterWriter{key: fmt.Sprintf("counter-%d", i)})
	}
	return m
}

// start runs the writers (publishers, putters, adders) until write ends
// and the readers (subscriber, consumer) until read ends.
func (m *mixedLoad) start(write, read context.Context, writers, readers *sync.WaitGroup) {
	writers.Go(func() { m.kb.publish(write, m.orders, nil) })
	readers.Go(func() { m.sub.follow(read, m.kb) })
	writers.Go(func() { m.kb.publishTo(write, "jobs", m.jobs, nil) })
	readers.Go(func() { m.consume(read) })
	for w := range mixedPutters {
		writers.Go(func() { m.put(write, w) })
	}
	for _, cw := range m.counters {
		writers.Go(func() { m.add(write, cw) })
	}
}

func (m *mixedLoad) fail(err error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
}

func (m *mixedLoad) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// session dials and opens the cache, retrying until ctx ends.
func (m *mixedLoad) session(ctx context.Context) (*client.Client, *client.Cache, error) {
	for ctx.Err() == nil {
		c, err := m.kb.dial(ctx)
		if err != nil {
			continue
		}
		k, err := c.OpenCache(ctx, "default", "kv")
		if err == nil {
			return c, k, nil
		}
		c.Close()
	}
	return nil, nil, ctx.Err()
}

// consume is one member of group "workers" on jobs, redialling after any
// failure; it acks each delivery without waiting (at-least-once).
func (m *mixedLoad) consume(ctx context.Context) {
	for ctx.Err() == nil {
		c, err := m.kb.dial(ctx)
		if err != nil {
			continue
		}
		q, err := c.Consume(ctx, "default", "jobs", "workers", client.QueueOptions{Member: "mixed", MaxInflight: 256})
		for err == nil {
			var msg client.QueueMessage
			if msg, err = q.Next(ctx); err == nil {
				m.consumed.add(binary.BigEndian.Uint64(msg.Payload))
				err = q.AckAsync(msg.Ref())
			}
		}
		c.Close()
	}
}

// put writes sequence numbers to putter w's keys in turn, one at a time.
func (m *mixedLoad) put(ctx context.Context, w int) {
	var seq uint64
	for ctx.Err() == nil {
		c, k, err := m.session(ctx)
		if err != nil {
			return
		}
		for ctx.Err() == nil {
			seq++
			key := fmt.Sprintf("p%d-k%d", w, seq%mixedKeys)
			m.cache.try(key, seq)
			if err := k.Put(ctx, key, binary.BigEndian.AppendUint64(nil, seq), 0); err != nil {
				m.cache.unknownPut()
				break
			}
			m.cache.ack(key, seq)
		}
		c.Close()
	}
}

// add adds small deltas to cw's counter, one at a time. Each acked add
// must return the running sum exactly; after a failed add, the counter
// read on reconnecting tells whether it was applied.
func (m *mixedLoad) add(ctx context.Context, cw *counterWriter) {
	for ctx.Err() == nil {
		c, k, err := m.session(ctx)
		if err != nil {
			return
		}
		if err := cw.resolve(ctx, k); err != nil {
			c.Close()
			if !errors.Is(err, errRetry) {
				m.fail(err)
				return
			}
			continue
		}
		for ctx.Err() == nil {
			delta := int64(1 + rand.IntN(9))
			v, err := k.CounterAdd(ctx, cw.key, delta)
			if err != nil {
				cw.lost(delta)
				break
			}
			if err := cw.acked(delta, v); err != nil {
				m.fail(err)
			}
		}
		c.Close()
	}
}

// checkCache reads back every key that has an acked put: the value must be
// that put's or a later tried one's.
func (m *mixedLoad) checkCache(ctx context.Context) error {
	return m.checkWith(ctx, func(cctx context.Context, k *client.Cache) error { return m.readBack(cctx, k) })
}

func (m *mixedLoad) readBack(cctx context.Context, k *client.Cache) error {
	for _, key := range m.cache.keys() {
		acked := m.cache.ackedSeq(key)
		v, found, err := k.Get(cctx, key)
		if err != nil {
			return fmt.Errorf("cache check: get %s: %w", key, err)
		}
		if !found || len(v) != 8 {
			return fmt.Errorf("cache check: acked put %s=%d lost (found %v, %d bytes)", key, acked, found, len(v))
		}
		got, tried := binary.BigEndian.Uint64(v), m.cache.triedSeq(key)
		if got < acked || got > tried {
			return fmt.Errorf("cache check: %s reads %d, acked %d, last tried %d", key, got, acked, tried)
		}
	}
	return nil
}

// checkCounters reads each counter once the load stopped: the sum of its
// acked deltas, plus the last add's delta if its outcome is unknown.
func (m *mixedLoad) checkCounters(ctx context.Context) error {
	return m.checkWith(ctx, func(cctx context.Context, k *client.Cache) error {
		for _, cw := range m.counters {
			if err := cw.resolve(cctx, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkWith runs check on a fresh connection's cache handle.
func (m *mixedLoad) checkWith(ctx context.Context, check func(context.Context, *client.Cache) error) error {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, k, err := m.session(cctx)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer c.Close()
	return check(cctx, k)
}

func (m *mixedLoad) progress() mixedProgress {
	p := mixedProgress{orders: m.orders.len(), jobs: m.jobs.len(), puts: m.cache.ackedPuts()}
	for _, cw := range m.counters {
		p.adds += cw.ackedAdds()
	}
	return p
}

func (m *mixedLoad) summary() string {
	var adds, unknown, applied int
	var sum int64
	for _, cw := range m.counters {
		cw.mu.Lock()
		adds, unknown, applied, sum = adds+cw.adds, unknown+cw.unknown, applied+cw.applied, sum+cw.value
		cw.mu.Unlock()
	}
	m.cache.mu.Lock()
	puts, unknownPuts := m.cache.puts, m.cache.unknown
	m.cache.mu.Unlock()
	return fmt.Sprintf("orders %d acked, %d delivered exactly once (%d resubscribes); jobs %d acked, %d delivered to the group (%d redeliveries); "+
		"cache %d puts acked, %d with unknown outcome, every acked put read back; counters %d adds acked (sum %d, exact), %d unknown outcomes (%d of them applied)",
		m.orders.len(), m.sub.count(), m.sub.resubscribes, m.jobs.len(), m.consumed.distinct(), m.consumed.repeats(),
		puts, unknownPuts, adds, sum, unknown, applied)
}

// mixedProgress counts what each part of the load had acked.
type mixedProgress struct{ orders, jobs, puts, adds int }

func (p mixedProgress) allPast(q mixedProgress) bool {
	return p.orders > q.orders && p.jobs > q.jobs && p.puts > q.puts && p.adds > q.adds
}

func (p mixedProgress) String() string {
	return fmt.Sprintf("%d orders, %d jobs, %d puts, %d adds acked", p.orders, p.jobs, p.puts, p.adds)
}
