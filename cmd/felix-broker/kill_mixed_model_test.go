package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/felixmq/felix/client"
)

// seqCount counts deliveries of each sequence number (at-least-once).
type seqCount struct {
	mu sync.Mutex
	n  map[uint64]int
}

func (s *seqCount) add(v uint64) { s.mu.Lock(); s.n[v]++; s.mu.Unlock() }

func (s *seqCount) distinct() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.n) }

// repeats counts deliveries beyond the first.
func (s *seqCount) repeats() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := 0
	for _, n := range s.n {
		r += n - 1
	}
	return r
}

func (s *seqCount) covers(acked *seqSet) bool { return s.coversAll(acked.snapshot()) }

func (s *seqCount) coversAll(seqs []uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range seqs {
		if s.n[v] == 0 {
			return false
		}
	}
	return true
}

func (s *seqSet) snapshot() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.m))
}

// coversAll reports whether every one of seqs was seen.
func (r *resumer) coversAll(seqs []uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range seqs {
		if !r.seen[s] {
			return false
		}
	}
	return true
}

// cacheModel is what the putters tried and were acked, per key. Each key
// has one putter, whose sequence numbers only grow.
type cacheModel struct {
	mu            sync.Mutex
	acked, tried  map[string]uint64
	puts, unknown int
}

func (c *cacheModel) try(key string, seq uint64) { c.mu.Lock(); c.tried[key] = seq; c.mu.Unlock() }

func (c *cacheModel) ack(key string, seq uint64) {
	c.mu.Lock()
	c.acked[key] = seq
	c.puts++
	c.mu.Unlock()
}

func (c *cacheModel) unknownPut() { c.mu.Lock(); c.unknown++; c.mu.Unlock() }

func (c *cacheModel) ackedPuts() int { c.mu.Lock(); defer c.mu.Unlock(); return c.puts }

func (c *cacheModel) ackedSeq(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked[key]
}

func (c *cacheModel) triedSeq(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tried[key]
}

func (c *cacheModel) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.acked))
}

// counterWriter is one counter's model: value is the sum of the deltas
// known applied; pending is the delta of the last add whose outcome is
// unknown (its ack lost with the connection), 0 when none.
type counterWriter struct {
	key string

	mu                     sync.Mutex
	value, pending         int64
	adds, unknown, applied int
}

// errRetry is a read that failed for the connection's sake: try again on
// the next one.
var errRetry = errors.New("counter read failed; retrying")

// resolve reads the counter: it must be value, or value+pending when an
// add's outcome is unknown, which the read then settles.
func (cw *counterWriter) resolve(ctx context.Context, k *client.Cache) error {
	got, err := k.CounterGet(ctx, cw.key)
	if err != nil {
		return fmt.Errorf("%w: %w", errRetry, err)
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	switch {
	case got == cw.value:
	case cw.pending != 0 && got == cw.value+cw.pending:
		cw.value = got
		cw.applied++
	default:
		return fmt.Errorf("counter %s reads %d: acked sum %d, unknown add %d", cw.key, got, cw.value, cw.pending)
	}
	cw.pending = 0
	return nil
}

// acked records an acked add and checks its reply.
func (cw *counterWriter) acked(delta, got int64) error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	want := cw.value + delta
	cw.value, cw.adds = got, cw.adds+1
	if got != want {
		return fmt.Errorf("counter %s: add %d acked with %d, want %d", cw.key, delta, got, want)
	}
	return nil
}

// lost records an add whose outcome is unknown.
func (cw *counterWriter) lost(delta int64) {
	cw.mu.Lock()
	cw.pending = delta
	cw.unknown++
	cw.mu.Unlock()
}

func (cw *counterWriter) ackedAdds() int { cw.mu.Lock(); defer cw.mu.Unlock(); return cw.adds }
