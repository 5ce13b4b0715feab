package fanout

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func newTestBatcher(t testing.TB, cfg BatchConfig) *Batcher {
	t.Helper()
	bt, err := NewBatcher(cfg)
	require.NoError(t, err)
	return bt
}

// batchShape returns the events of each buffer in a batch.
func batchShape(batch []*Buffer) []int {
	var ev []int
	for _, b := range batch {
		ev = append(ev, b.Events)
	}
	return ev
}

func TestBatchConfigZeroValueIsThroughputProfileAndRejectsNegatives(t *testing.T) {
	bt := newTestBatcher(t, BatchConfig{})
	require.Equal(t, BatchConfig{MaxEvents: 64, MaxBytes: 64 << 10, MaxDelay: 250 * time.Microsecond}, bt.Config())
	require.Equal(t, NoDelay, newTestBatcher(t, BatchConfig{MaxDelay: NoDelay}).Config().MaxDelay)
	_, err := NewBatcher(BatchConfig{MaxEvents: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewBatcher(BatchConfig{MaxBytes: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// TestBatchDeadlineIsMeasuredFromFirstEvent is the design point of docs/design.md,
// "Transport": with one event every 100µs and MaxDelay 250µs, each batch closes 250µs
// after its first event with at most three events. A wait that restarted on
// every arrival would never expire and would hold events until 64 piled
// up (the published Felix's 190µs → 6ms regression).
func TestBatchDeadlineIsMeasuredFromFirstEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const events = 30
		p := newTestPool(t)
		q := newTestQueue(t, Config{Capacity: 1024})
		bt := newTestBatcher(t, BatchConfig{MaxDelay: 250 * time.Microsecond})
		start := time.Now()

		go func() {
			tick := time.NewTicker(100 * time.Microsecond)
			defer tick.Stop()
			for range events {
				<-tick.C
				// BaseOffset carries the push time so the consumer can
				// measure how long the first event waited.
				_, err := q.Push(newBuf(p, 1, 8, uint64(time.Since(start))))
				require.NoError(t, err)
			}
		}()

		var shapes [][]int
		var batch []*Buffer
		for got := 0; got < events; {
			var err error
			batch, err = bt.Next(context.Background(), q, batch[:0])
			require.NoError(t, err)
			waited := time.Since(start) - time.Duration(batch[0].BaseOffset)
			require.LessOrEqual(t, waited, 250*time.Microsecond, "first event waited past MaxDelay")
			shapes = append(shapes, batchShape(batch))
			got += len(batch)
			batch = ReleaseAll(batch)
		}
		require.Len(t, shapes, events/3)
		for _, s := range shapes {
			require.Equal(t, []int{1, 1, 1}, s)
		}
	})
}

// TestBatchClosesAtMaxEvents proves the event limit ends a batch without
// waiting, and that the remainder waits exactly MaxDelay from its first
// buffer before going out.
func TestBatchClosesAtMaxEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		q := newTestQueue(t, Config{})
		pushN(t, p, q, 0, 10)
		bt := newTestBatcher(t, BatchConfig{MaxEvents: 4, MaxDelay: time.Millisecond})
		start := time.Now()
		var batch []*Buffer
		for _, want := range []int{4, 4} {
			batch, _ = bt.Next(context.Background(), q, batch[:0])
			require.Len(t, batch, want)
			require.Zero(t, time.Since(start), "a full batch waited")
			batch = ReleaseAll(batch)
		}
		batch, _ = bt.Next(context.Background(), q, batch[:0])
		require.Len(t, batch, 2)
		require.Equal(t, time.Millisecond, time.Since(start))
		ReleaseAll(batch)
	})
}

// TestBatchClosesAtMaxBytes proves the byte limit: a buffer that would
// push the batch past MaxBytes is left for the next batch.
func TestBatchClosesAtMaxBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		q := newTestQueue(t, Config{})
		for i := range 5 {
			_, err := q.Push(newBuf(p, 1, 100, uint64(i)))
			require.NoError(t, err)
		}
		bt := newTestBatcher(t, BatchConfig{MaxBytes: 250})
		start := time.Now()
		var batch []*Buffer
		for _, want := range []int{2, 2} {
			batch, _ = bt.Next(context.Background(), q, batch[:0])
			require.Len(t, batch, want)
			batch = ReleaseAll(batch)
		}
		require.Zero(t, time.Since(start), "a batch stopped by MaxBytes waited")
		batch, _ = bt.Next(context.Background(), q, batch[:0])
		require.Len(t, batch, 1)
		ReleaseAll(batch)
	})
}

// TestBatchOversizeBufferGoesOutAlone proves a buffer that alone exceeds
// MaxEvents or MaxBytes is sent whole and alone, and that the batch before
// it closes at once instead of waiting for room that will never come.
func TestBatchOversizeBufferGoesOutAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		q := newTestQueue(t, Config{Capacity: 4096})
		for i, b := range []*Buffer{
			newBuf(p, 1, 10, 0),
			newBuf(p, 100, 10, 1),    // over MaxEvents
			newBuf(p, 1, 100<<10, 2), // over MaxBytes
			newBuf(p, 1, 10, 3),
		} {
			_, err := q.Push(b)
			require.NoError(t, err, "push %d", i)
		}
		bt := newTestBatcher(t, BatchConfig{})
		start := time.Now()
		var batch []*Buffer
		for _, want := range []uint64{0, 1, 2} {
			batch, _ = bt.Next(context.Background(), q, batch[:0])
			require.Len(t, batch, 1)
			require.Equal(t, want, batch[0].BaseOffset)
			batch = ReleaseAll(batch)
		}
		require.Zero(t, time.Since(start), "oversize handling waited")
		batch, _ = bt.Next(context.Background(), q, batch[:0])
		require.Equal(t, uint64(3), batch[0].BaseOffset)
		ReleaseAll(batch)
	})
}

// TestBatchLatencyProfileSendsEachBufferImmediately proves the latency
// profile: MaxEvents 1 sends each buffer alone, and NoDelay sends what is
// queued without waiting, both with zero added delay.
func TestBatchLatencyProfileSendsEachBufferImmediately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		q := newTestQueue(t, Config{})
		start := time.Now()
		var batch []*Buffer

		pushN(t, p, q, 0, 3)
		one := newTestBatcher(t, BatchConfig{MaxEvents: 1})
		for range 3 {
			batch, _ = one.Next(context.Background(), q, batch[:0])
			require.Len(t, batch, 1)
			batch = ReleaseAll(batch)
		}

		pushN(t, p, q, 3, 6)
		noDelay := newTestBatcher(t, BatchConfig{MaxDelay: NoDelay})
		batch, _ = noDelay.Next(context.Background(), q, batch[:0])
		require.Len(t, batch, 3)
		batch = ReleaseAll(batch)
		pushN(t, p, q, 6, 7)
		batch, _ = noDelay.Next(context.Background(), q, batch[:0])
		require.Len(t, batch, 1)
		ReleaseAll(batch)
		require.Zero(t, time.Since(start), "latency profile waited")
	})
}

// TestBatchReturnsPartialBatchThenErrorOnCloseOrCancel proves that a batch
// in progress is handed over when the queue closes or ctx ends, and that
// the error comes with the next, empty call.
func TestBatchReturnsPartialBatchThenErrorOnCloseOrCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(t)
		bt := newTestBatcher(t, BatchConfig{MaxDelay: time.Second})

		q := newTestQueue(t, Config{})
		pushN(t, p, q, 0, 1)
		go func() {
			synctest.Wait()
			q.Close()
		}()
		batch, err := bt.Next(context.Background(), q, nil)
		require.NoError(t, err)
		require.Len(t, batch, 1)
		batch = ReleaseAll(batch)
		batch, err = bt.Next(context.Background(), q, batch)
		require.ErrorIs(t, err, ErrClosed)
		require.Empty(t, batch)

		q = newTestQueue(t, Config{})
		pushN(t, p, q, 0, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			synctest.Wait()
			cancel()
		}()
		batch, err = bt.Next(ctx, q, batch)
		require.NoError(t, err)
		require.Len(t, batch, 1)
		batch = ReleaseAll(batch)
		_, err = bt.Next(ctx, q, batch)
		require.ErrorIs(t, err, context.Canceled)
	})
}

// BenchmarkBatcherNext is the cost of gathering full 64-event batches from
// a backlog, per buffer.
func BenchmarkBatcherNext(b *testing.B) {
	p := &Pool{}
	q, err := NewQueue(Config{Capacity: 64})
	require.NoError(b, err)
	bt := newTestBatcher(b, BatchConfig{})
	buf := newBuf(p, 1, 512, 0)
	batch := make([]*Buffer, 0, 64)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for range 64 {
			buf.Retain()
			_, _ = q.Push(buf)
		}
		batch, _ = bt.Next(ctx, q, batch[:0])
		if len(batch) != 64 {
			b.Fatalf("batch of %d", len(batch))
		}
		batch = ReleaseAll(batch)
	}
	buf.Release()
	requireIdle(b, p)
}
