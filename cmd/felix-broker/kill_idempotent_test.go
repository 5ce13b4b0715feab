package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/impair"
)

// TestKill9IdempotentPublishersExactlyOnce is the exactly-once scenario on
// the real binary: idempotent publishers keep 64 batches of two records in
// flight to an on_commit stream, and re-send every unanswered batch after
// their connection dies, while the broker is killed with SIGKILL at random
// moments and restarted on the same address, certificate and data
// directory. At the end every batch is acknowledged, every record is in the
// log exactly once, each publisher's in the order it sent them, and every
// ack's offset is where its batch's first record is.
func TestKill9IdempotentPublishersExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a broker process several times")
	}
	rounds := killRounds(t, 5)
	kb := newKillableBroker(t)
	kb.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*15*time.Second+60*time.Second)
	defer cancel()
	run := newIdemRun(t, ctx, kb, 2, nil)
	for r := range rounds {
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond) // the kill lands anywhere in the load
		before := run.acked()
		kb.kill(t)
		restarted := time.Now()
		kb.start(t)
		require.Eventually(t, func() bool { return run.acked() > before }, 30*time.Second, 5*time.Millisecond,
			"round %d: no batch acked after the restart", r)
		t.Logf("round %d: killed with %d batches acked; acking again %v after the restart", r, before, time.Since(restarted).Round(time.Millisecond))
	}
	time.Sleep(300 * time.Millisecond)
	st := run.finish(t, ctx)
	t.Logf("%d kills: %d batches (%d records) acked, each once in the log; %d re-sent, %d reconnects",
		rounds, st.batches, 2*st.batches, st.resends, st.reconnects)
}

// TestImpairedIdempotentPublishersExactlyOnce is the same through the
// impairment relay: 5% of the datagrams lost each way, 30% of the
// connections reset mid-publish (closed by the client at a random moment),
// and two kills of the broker: still every record exactly once, in order,
// at the offset its ack named.
func TestImpairedIdempotentPublishersExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process through an impaired network")
	}
	kb := newKillableBroker(t)
	kb.start(t)
	proxy, err := impair.New(kb.addr)
	require.NoError(t, err)
	defer proxy.Close()
	proxy.Set(impair.Both, impair.Impairment{Loss: 0.05})
	via := &killableBroker{addr: proxy.Addr(), pool: kb.pool, serverName: "127.0.0.1"}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var conns, resets atomic.Int64
	reset := func(c *client.Client) { // 3 connections in 10, a random moment after they open
		if n := conns.Add(1); n%10 != 1 && n%10 != 4 && n%10 != 7 {
			return
		}
		time.AfterFunc(time.Duration(50+rand.IntN(500))*time.Millisecond, func() {
			resets.Add(1)
			c.Conn().CloseWithError(0x52, "reset mid-publish by the test")
		})
	}
	run := newIdemRun(t, ctx, via, 2, reset)
	for r := range 2 {
		time.Sleep(time.Duration(700+rand.IntN(500)) * time.Millisecond) // the kill lands anywhere in the load
		before := run.acked()
		kb.kill(t)
		kb.start(t)
		require.Eventually(t, func() bool { return run.acked() > before }, 30*time.Second, 5*time.Millisecond,
			"round %d: no batch acked after the restart", r)
	}
	time.Sleep(time.Second)
	st := run.finish(t, ctx)
	ps := proxy.Stats()
	require.Positive(t, resets.Load())
	t.Logf("through 5%% loss, %d of %d connections reset, 2 kills: %d batches (%d records) acked, each once in the log; %d re-sent, %d reconnects; relay dropped %d of %d datagrams",
		resets.Load(), conns.Load(), st.batches, 2*st.batches, st.resends, st.reconnects, ps.Dropped(), ps.Relayed+ps.Dropped())
}

// idemRun is N idempotent publishers and what their acks said.
type idemRun struct {
	kb    *killableBroker
	pubs  []*client.IdempotentPublisher
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	acks  map[[2]uint64]uint64 // (publisher, batch) → the offset its ack named
	errs  []error
	count int
}

// idemPayload is record i (0 or 1) of batch n of publisher p: p, n, i,
// padded to 128 bytes.
func idemPayload(p, n uint64, i int) []byte {
	b := make([]byte, 128)
	binary.BigEndian.PutUint64(b[0:], p)
	binary.BigEndian.PutUint64(b[8:], n)
	b[16] = byte(i)
	return b
}

// newIdemRun starts n publishers. wrap, if set, sees every connection a
// publisher makes (the first one and every redial), to damage it.
func newIdemRun(t *testing.T, ctx context.Context, kb *killableBroker, n int, wrap func(*client.Client)) *idemRun {
	pctx, stop := context.WithCancel(ctx)
	run := &idemRun{kb: kb, stop: stop, acks: map[[2]uint64]uint64{}}
	for p := range n {
		first, err := dialRetrying(ctx, kb)
		require.NoError(t, err)
		t.Cleanup(func() { first.Close() })
		if wrap != nil {
			wrap(first)
		}
		opts := client.IdempotentOptions{DialTimeout: time.Second, Redial: func(ctx context.Context, _ string) (*client.Client, error) {
			c, err := kb.dial(ctx)
			if err == nil && wrap != nil {
				wrap(c)
			}
			return c, err
		}}
		pub, err := first.NewIdempotentPublisher(ctx, "default", "orders", opts)
		require.NoError(t, err)
		run.pubs = append(run.pubs, pub)
		run.wg.Go(func() { run.publish(pctx, uint64(p), pub) })
	}
	return run
}

// dialRetrying dials until the broker answers (it may be starting).
func dialRetrying(ctx context.Context, kb *killableBroker) (*client.Client, error) {
	for {
		c, err := kb.dial(ctx)
		if err == nil || ctx.Err() != nil {
			return c, err
		}
	}
}

// publish sends batches until ctx ends, then waits for every answer.
func (run *idemRun) publish(ctx context.Context, p uint64, pub *client.IdempotentPublisher) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := uint64(0); ctx.Err() == nil; n++ {
		pa := pub.PublishAsync(ctx, nil, [][]byte{idemPayload(p, n, 0), idemPayload(p, n, 1)})
		wg.Go(func() {
			// The answer may take several restarts: wait without ctx.
			err := pa.Wait(context.Background())
			run.mu.Lock()
			defer run.mu.Unlock()
			switch {
			case errors.Is(err, context.Canceled) && ctx.Err() != nil:
				return // never sent: the run stopped while it waited for room
			case err != nil:
				run.errs = append(run.errs, fmt.Errorf("publisher %d batch %d: %w", p, n, err))
				return
			}
			run.acks[[2]uint64{p, n}] = pa.Result().Offset
			run.count++
		})
	}
}

func (run *idemRun) acked() int {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.count
}

type idemStats struct {
	batches             int
	resends, reconnects uint64
}

// finish stops publishing, waits for every answer, closes the publishers
// and reads the whole log back: each batch acked, each record once, in each
// publisher's order, at the offset its ack named.
func (run *idemRun) finish(t *testing.T, ctx context.Context) idemStats {
	run.stop()
	run.wg.Wait()
	st := idemStats{batches: len(run.acks)}
	for _, pub := range run.pubs {
		require.NoError(t, pub.Close(ctx))
		st.resends += pub.Resends()
		st.reconnects += pub.Reconnects()
	}
	require.Empty(t, run.errs, "every batch published is acknowledged")
	require.Positive(t, st.batches)

	c, err := dialRetrying(ctx, run.kb)
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	next := map[uint64]uint64{} // publisher → next batch expected
	for off := uint64(0); off < uint64(2*st.batches); off++ {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, off, ev.Offset)
		p, n, i := binary.BigEndian.Uint64(ev.Payload), binary.BigEndian.Uint64(ev.Payload[8:]), int(ev.Payload[16])
		require.Equal(t, int(off%2), i, "offset %d: the two records of a batch are adjacent", off)
		if i == 1 {
			continue
		}
		require.Equal(t, next[p], n, "offset %d: publisher %d's batches once each, in order", off, p)
		next[p]++
		ackOff, ok := run.acks[[2]uint64{p, n}]
		require.True(t, ok, "offset %d: batch %d of publisher %d was never acknowledged", off, n, p)
		require.Equal(t, off, ackOff, "the ack of batch %d of publisher %d named offset %d", n, p, ackOff)
	}
	// Nothing after them: a fresh producer's first batch lands right after.
	pub, err := c.NewIdempotentPublisher(ctx, "default", "orders", client.IdempotentOptions{})
	require.NoError(t, err)
	res, err := pub.Publish(ctx, [][]byte{[]byte("last")})
	require.NoError(t, err)
	require.Equal(t, uint64(2*st.batches), res.Offset)
	keys := make([]uint64, 0, len(next))
	for p := range next {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
	for _, p := range keys {
		t.Logf("publisher %d: %d batches", p, next[p])
	}
	return st
}
