package fanout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// pushN pushes one-event buffers with offsets from..to-1 and returns the
// results.
func pushN(t *testing.T, p *Pool, q *Queue, from, to int) []PushResult {
	t.Helper()
	var res []PushResult
	for i := from; i < to; i++ {
		r, err := q.Push(newBuf(p, 1, 8, uint64(i)))
		require.NoError(t, err)
		res = append(res, r)
	}
	return res
}

// drain takes everything queued and returns the offsets.
func drain(q *Queue) []uint64 {
	var offs []uint64
	for {
		b, ok := q.TryNext()
		if !ok {
			return offs
		}
		offs = append(offs, b.BaseOffset)
		b.Release()
	}
}

func TestNewQueueZeroConfigIsDropNew64KAnd64MiBAndRejectsBadValues(t *testing.T) {
	q, err := NewQueue(Config{})
	require.NoError(t, err)
	require.Equal(t, 65536, q.Capacity())
	require.Equal(t, 64<<20, q.MaxBytes())
	require.Equal(t, DropNew, q.Policy())
	require.Equal(t, "drop_new", q.Policy().String())

	_, err = NewQueue(Config{Capacity: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewQueue(Config{MaxBytes: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewQueue(Config{Policy: CatchUp + 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// TestDropNewKeepsOldestAndCountsEveryDrop proves drop_new: a full queue
// keeps what it holds, refuses the newcomers, and counts each of them.
func TestDropNewKeepsOldestAndCountsEveryDrop(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 4, Policy: DropNew})
	res := pushN(t, p, q, 0, 6)
	require.Equal(t, []PushResult{Queued, Queued, Queued, Queued, Dropped, Dropped}, res)
	s := q.Stats()
	require.Equal(t, Stats{Pushed: 6, Enqueued: 4, DroppedEvents: 2, DroppedBuffers: 2, Depth: 4, DepthBuffers: 4, DepthBytes: 32}, s)
	require.Equal(t, int64(4), p.Stats().BuffersOutstanding, "dropped buffers were not released")
	require.Equal(t, []uint64{0, 1, 2, 3}, drain(q))
	require.Equal(t, uint64(4), q.Stats().Delivered)
}

// TestDropOldEvictsOldestAndKeepsNewest proves drop_old really evicts (the
// published Felix's drop_old behaved like drop_new): the oldest buffers are
// released and counted until the newcomer fits.
func TestDropOldEvictsOldestAndKeepsNewest(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 4, Policy: DropOld})
	res := pushN(t, p, q, 0, 6)
	require.Equal(t, []PushResult{Queued, Queued, Queued, Queued, QueuedEvicted, QueuedEvicted}, res)
	require.Equal(t, int64(4), p.Stats().BuffersOutstanding, "evicted buffers were not released")

	// A three-event buffer must evict three one-event buffers, not one.
	r, err := q.Push(newBuf(p, 3, 8, 6))
	require.NoError(t, err)
	require.Equal(t, QueuedEvicted, r)
	s := q.Stats()
	require.Equal(t, uint64(5), s.DroppedEvents)
	require.Equal(t, uint64(5), s.DroppedBuffers)
	require.Equal(t, 4, s.Depth)
	require.Equal(t, 2, s.DepthBuffers)
	require.Equal(t, []uint64{5, 6}, drain(q))
}

// TestCapacityCountsEventsNotBuffers proves the bound is on events.
func TestCapacityCountsEventsNotBuffers(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 10})
	for _, tc := range []struct {
		events int
		want   PushResult
	}{{6, Queued}, {5, Dropped}, {4, Queued}, {1, Dropped}} {
		r, err := q.Push(newBuf(p, tc.events, 8, 0))
		require.NoError(t, err)
		require.Equal(t, tc.want, r, "push of %d events", tc.events)
	}
	require.Equal(t, 10, q.Stats().Depth)
}

// TestOversizeBufferIsAdmittedOnlyIntoEmptyQueue proves a batch larger
// than the capacity is delivered whole rather than never, without letting
// the queue grow past one such buffer: drop_new admits it only into an
// empty queue, drop_old empties the queue for it.
func TestOversizeBufferIsAdmittedOnlyIntoEmptyQueue(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 4, Policy: DropNew})
	r, err := q.Push(newBuf(p, 10, 8, 0))
	require.NoError(t, err)
	require.Equal(t, Queued, r, "oversize into empty queue")
	require.Equal(t, []PushResult{Dropped}, pushN(t, p, q, 1, 2))
	require.Equal(t, []uint64{0}, drain(q))
	pushN(t, p, q, 2, 3)
	r, err = q.Push(newBuf(p, 10, 8, 3))
	require.NoError(t, err)
	require.Equal(t, Dropped, r, "oversize into non-empty drop_new queue")
	require.Equal(t, []uint64{2}, drain(q))

	q = newTestQueue(t, Config{Capacity: 4, Policy: DropOld})
	pushN(t, p, q, 0, 3)
	r, err = q.Push(newBuf(p, 10, 8, 3))
	require.NoError(t, err)
	require.Equal(t, QueuedEvicted, r)
	require.Equal(t, Stats{Pushed: 13, Enqueued: 13, DroppedEvents: 3, DroppedBuffers: 3, Depth: 10, DepthBuffers: 1, DepthBytes: 8}, q.Stats())
	require.Equal(t, []uint64{3}, drain(q))
}

func TestPushRejectsBufferWithoutEventsAndReleasesIt(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{})
	r, err := q.Push(newBuf(p, 0, 8, 0))
	require.ErrorIs(t, err, ErrNoEvents)
	require.Equal(t, Dropped, r)
	require.Zero(t, q.Stats().Pushed)
}

// TestBlockPushWaitsForSpaceAndResumes proves the lossless mode: a push
// into a full Block queue parks until the consumer frees space, then
// completes, and nothing is dropped.
func TestBlockPushWaitsForSpaceAndResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		q := newTestQueue(t, Config{Capacity: 2, Policy: Block})
		pushN(t, p, q, 0, 2)
		done := make(chan PushResult, 1)
		go func() {
			r, err := q.Push(newBuf(p, 1, 8, 2))
			require.NoError(t, err)
			done <- r
		}()
		synctest.Wait()
		require.Empty(t, done, "push into a full Block queue did not wait")

		b, err := q.Next(context.Background())
		require.NoError(t, err)
		b.Release()
		synctest.Wait()
		require.Equal(t, Queued, <-done)
		require.Equal(t, []uint64{1, 2}, drain(q))
		require.Zero(t, q.Stats().DroppedEvents)
	})
}

// TestBlockPushWaitCancelledDropsAndCounts proves a publisher can give up
// on a Block subscriber, and that the abandoned buffer is released and
// counted so delivered + dropped still equals pushed.
func TestBlockPushWaitCancelledDropsAndCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		q := newTestQueue(t, Config{Capacity: 1, Policy: Block})
		pushN(t, p, q, 0, 1)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			r, err := q.PushWait(ctx, newBuf(p, 1, 8, 1))
			require.Equal(t, Dropped, r)
			errc <- err
		}()
		synctest.Wait()
		require.Empty(t, errc)
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		s := q.Stats()
		require.Equal(t, uint64(1), s.DroppedEvents)
		require.Equal(t, uint64(2), s.Pushed)
		require.Equal(t, int64(1), p.Stats().BuffersOutstanding)
	})
}

// TestCloseReleasesQueuedAndWakesBlockedPusherAndConsumer proves Close:
// queued buffers are released and counted, a parked Block pusher and a
// parked consumer both return ErrClosed, later pushes fail, and a second
// Close is harmless.
func TestCloseReleasesQueuedAndWakesBlockedPusherAndConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		full := newTestQueue(t, Config{Capacity: 1, Policy: Block})
		empty := newTestQueue(t, Config{})
		pushN(t, p, full, 0, 1)
		errc := make(chan error, 2)
		go func() {
			_, err := full.Push(newBuf(p, 1, 8, 1))
			errc <- err
		}()
		go func() {
			_, err := empty.Next(context.Background())
			errc <- err
		}()
		synctest.Wait()
		require.Empty(t, errc)

		full.Close()
		empty.Close()
		require.ErrorIs(t, <-errc, ErrClosed)
		require.ErrorIs(t, <-errc, ErrClosed)
		full.Close()

		s := full.Stats()
		require.Equal(t, Stats{Pushed: 2, Enqueued: 1, DroppedEvents: 2, DroppedBuffers: 2}, s)
		r, err := full.Push(newBuf(p, 1, 8, 2))
		require.ErrorIs(t, err, ErrClosed)
		require.Equal(t, Dropped, r)
		_, ok := full.TryNext()
		require.False(t, ok)
		select {
		case <-full.Done():
		default:
			t.Fatal("Done not closed")
		}
	})
}

func TestNextReturnsContextErrorWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQueue(t, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := q.Next(ctx)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
	})
}

// TestAccountingIsExactUnderConcurrency proves docs/design.md, "Semantics":
// drops are counted, never silent, under -race: one publisher, one slow consumer,
// random capacities and batch sizes, every policy, with the subscriber
// sometimes leaving (closing its queue) mid-stream. For every run the
// consumer's delivered events plus the counted drops equal the pushed
// events exactly, delivery stays in order, and every buffer is released.
func TestAccountingIsExactUnderConcurrency(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, policy := range []Policy{DropNew, DropOld, Block} {
		for trial := range 6 {
			cfg := Config{Capacity: 1 + rng.IntN(64), Policy: policy}
			leaveAfter := -1 // consumer never leaves
			if trial%3 == 2 {
				leaveAfter = rng.IntN(500)
			}
			useBatcher := trial%2 == 1
			t.Run(fmt.Sprintf("%s/cap=%d/batcher=%v/leave=%d", policy, cfg.Capacity, useBatcher, leaveAfter), func(t *testing.T) {
				runAccountingTrial(t, cfg, useBatcher, leaveAfter, rng.Uint64())
			})
		}
	}
}

func runAccountingTrial(t *testing.T, cfg Config, useBatcher bool, leaveAfter int, seed uint64) {
	const buffers = 3000
	p := newTestPool(t)
	q := newTestQueue(t, cfg)
	rng := rand.New(rand.NewPCG(seed, 2))

	var delivered uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		delivered = consumeSlowly(t, q, useBatcher, leaveAfter)
	})

	var pushed uint64
	for i := range buffers {
		ev := 1 + rng.IntN(8)
		pushed += uint64(ev)
		_, err := q.Push(newBuf(p, ev, 8, uint64(i)))
		if err != nil {
			require.ErrorIs(t, err, ErrClosed)
		}
	}
	q.Close()
	wg.Wait()

	s := q.Stats()
	require.Equal(t, pushed, s.Pushed)
	require.Equal(t, delivered, s.Delivered)
	require.Equal(t, pushed, delivered+s.DroppedEvents, "delivered + dropped != pushed")
	require.Zero(t, s.Depth)
	require.Zero(t, s.DepthBuffers)
	if cfg.Policy == Block && leaveAfter < 0 {
		require.Equal(t, s.Enqueued, pushed, "Block dropped on push")
	}
}

// consumeSlowly drains q, yielding often so the queue fills, checks that
// offsets only grow, and returns the events it received. With leaveAfter >=
// 0 it closes the queue after that many buffers, like a subscriber that
// disconnects.
func consumeSlowly(t *testing.T, q *Queue, useBatcher bool, leaveAfter int) uint64 {
	bt, err := NewBatcher(BatchConfig{MaxEvents: 16})
	require.NoError(t, err)
	var (
		events uint64
		next   uint64
		n      int
		batch  []*Buffer
	)
	for {
		if useBatcher {
			batch, err = bt.Next(context.Background(), q, batch[:0])
		} else {
			var b *Buffer
			if b, err = q.Next(context.Background()); err == nil {
				batch = append(batch[:0], b)
			}
		}
		if err != nil {
			require.ErrorIs(t, err, ErrClosed)
			return events
		}
		for _, b := range batch {
			require.GreaterOrEqual(t, b.BaseOffset, next, "delivered out of order")
			next = b.BaseOffset + 1
			events += uint64(b.Events)
			n++
			if n == leaveAfter {
				q.Close()
			}
		}
		batch = ReleaseAll(batch)
		if n%3 == 0 {
			runtime.Gosched()
		}
	}
}

// BenchmarkQueuePushNext is the per-buffer cost of the queue itself: one
// push and one pop of a shared buffer, uncontended.
func BenchmarkQueuePushNext(b *testing.B) {
	p := &Pool{}
	q, err := NewQueue(Config{})
	require.NoError(b, err)
	buf := newBuf(p, 1, 512, 0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		buf.Retain()
		if _, err := q.Push(buf); err != nil {
			b.Fatal(err)
		}
		got, err := q.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
	buf.Release()
	requireIdle(b, p)
}

// BenchmarkQueuePushNextConcurrent is the same with the publisher and the
// subscriber writer on different goroutines (Block, so nothing is dropped
// and every buffer crosses), which includes the park/wake cost.
func BenchmarkQueuePushNextConcurrent(b *testing.B) {
	p := &Pool{}
	q, err := NewQueue(Config{Policy: Block})
	require.NoError(b, err)
	buf := newBuf(p, 1, 512, 0)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range b.N {
			got, err := q.Next(context.Background())
			if err != nil {
				panic(err)
			}
			got.Release()
		}
	})
	for range b.N {
		buf.Retain()
		if _, err := q.Push(buf); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	buf.Release()
	q.Close()
	requireIdle(b, p)
}

// WaitRoom returns at once when there is room, waits for the consumer when
// there is not, and gives up with the context.
func TestWaitRoomAdmitsOnlyWhenEventsFit(t *testing.T) {
	p := &Pool{}
	q, err := NewQueue(Config{Capacity: 2, Policy: Block})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.WaitRoom(context.Background(), 2))
	b := p.Get(8)
	b.Events = 2
	_, err = q.Push(b)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, q.WaitRoom(ctx, 1), context.Canceled)

	waited := make(chan error, 1)
	go func() { waited <- q.WaitRoom(context.Background(), 1) }()
	got, ok := q.TryNext()
	require.True(t, ok)
	got.Release()
	require.NoError(t, <-waited)
	require.Zero(t, p.Stats().BuffersOutstanding)
}

// Hand gives a buffer to the caller only while nothing is queued and the
// consumer is parked waiting, so a handed buffer never overtakes a queued
// one; a handed buffer counts as pushed and delivered, and the consumer
// gets what is pushed around it, in order.
func TestHandOnlyToAParkedConsumerOfAnEmptyQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool{}
		q := newTestQueue(t, Config{})
		var handed []uint64
		take := func(b *Buffer) bool { handed = append(handed, b.BaseOffset); return true }
		hand := func(off uint64, take func(*Buffer) bool) bool {
			b := newBuf(p, 1, 8, off)
			defer b.Release()
			return q.Hand(b, take)
		}
		require.False(t, hand(0, take), "no consumer waits")

		got := make(chan uint64, 4)
		go func() {
			for {
				b, err := q.Next(context.Background())
				if err != nil {
					return
				}
				got <- b.BaseOffset
				b.Release()
			}
		}()
		synctest.Wait()
		require.True(t, hand(1, take), "the consumer is parked on an empty queue")
		require.False(t, hand(2, func(*Buffer) bool { return false }), "the caller could not take it")
		_, err := q.Push(newBuf(p, 1, 8, 2))
		require.NoError(t, err)
		require.Equal(t, uint64(2), <-got)
		synctest.Wait()
		require.True(t, hand(3, take), "parked again")
		require.Equal(t, []uint64{1, 3}, handed)
		st := q.Stats()
		require.Equal(t, uint64(3), st.Pushed)
		require.Equal(t, uint64(3), st.Delivered)
		q.Close()
		synctest.Wait()
	})
}
