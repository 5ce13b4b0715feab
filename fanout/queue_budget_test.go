package fanout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// MaxBytes bounds a queue in bytes as Capacity does in events: whichever
// fills first decides, and the bytes are len(B) of what is queued.
func TestMaxBytesBoundsTheQueueBeforeCapacity(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 100, MaxBytes: 64, Policy: DropNew})
	for i := range 5 {
		_, err := q.Push(newBuf(p, 1, 16, uint64(i)))
		require.NoError(t, err)
	}
	s := q.Stats()
	require.Equal(t, 4, s.Depth, "four 16-byte buffers fill 64 bytes")
	require.Equal(t, 64, s.DepthBytes)
	require.EqualValues(t, 1, s.DroppedEvents)
	require.Equal(t, []uint64{0, 1, 2, 3}, drain(q))
	require.Zero(t, q.Stats().DepthBytes)
}

// The ring grows with what is queued and returns to its smallest size when
// the queue empties, so a large Capacity costs nothing while idle, and the
// order survives every resize.
func TestRingGrowsForABurstAndShrinksWhenEmpty(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 1000})
	require.Len(t, q.mu.ring, minRing)
	// Wrap the head first so the growth has to unwrap the ring.
	pushN(t, p, q, 0, 10)
	require.Len(t, drain(q), 10)
	pushN(t, p, q, 10, 500)
	require.GreaterOrEqual(t, len(q.mu.ring), 490)
	got := drain(q)
	require.Len(t, got, 490)
	for i, off := range got {
		require.EqualValues(t, 10+i, off)
	}
	require.Len(t, q.mu.ring, minRing)
}

// CatchUp: a push that does not fit empties the queue and refuses pushes
// until Resume; the consumer learns it from ErrLagging once it has taken
// what it already had, and nothing counts as dropped.
func TestCatchUpEmptiesAndRefusesUntilResume(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 4, Policy: CatchUp})
	require.Equal(t, []PushResult{Queued, Queued, Queued, Queued, Overflowed, Overflowed}, pushN(t, p, q, 0, 6))
	s := q.Stats()
	require.Zero(t, s.DroppedEvents)
	require.EqualValues(t, 6, s.Overflowed, "the four queued were emptied, the two pushes refused")
	require.EqualValues(t, 1, s.Overflows)
	require.Zero(t, s.Depth)

	_, err := q.Next(context.Background())
	require.ErrorIs(t, err, ErrLagging)
	bt, err := NewBatcher(BatchConfig{})
	require.NoError(t, err)
	_, err = bt.Next(context.Background(), q, nil)
	require.ErrorIs(t, err, ErrLagging)

	q.Resume()
	require.Equal(t, []PushResult{Queued}, pushN(t, p, q, 6, 7))
	require.Equal(t, []uint64{6}, drain(q))
	s = q.Stats()
	require.Equal(t, s.Pushed, s.Delivered+s.DroppedEvents+s.Overflowed+uint64(s.Depth))
}

// A consumer parked on a CatchUp queue is woken by the overflow that makes
// it lag. Every push wakes a parked consumer, so which push finds it parked
// is the scheduler's: the consumer takes and releases what it gets, the
// test pushes 1-event buffers into a 2-event queue until one overflows,
// and the consumer must then end with ErrLagging rather than wait on.
func TestCatchUpWakesAParkedConsumer(t *testing.T) {
	p := newTestPool(t)
	q := newTestQueue(t, Config{Capacity: 2, Policy: CatchUp})
	got := make(chan error, 1)
	go func() {
		for {
			b, err := q.Next(context.Background())
			if err != nil {
				got <- err
				return
			}
			b.Release()
		}
	}()
	for i := uint64(0); ; i++ {
		require.Less(t, i, uint64(1<<20), "the consumer kept up with every push")
		r, err := q.Push(newBuf(p, 1, 8, i))
		require.NoError(t, err)
		if r == Overflowed {
			break
		}
	}
	require.ErrorIs(t, <-got, ErrLagging)
}

// The Budget counts a buffer shared by many queues once, by the memory it
// pins, and refuses pushes over its limit only into queues holding at least
// their share of it: the subscriber that keeps up goes on receiving.
func TestBudgetCountsSharedBuffersOnceAndCutsOnlyTheLaggards(t *testing.T) {
	p := newTestPool(t)
	budget := NewBudget(4 * MinBufferSize)
	slow := newTestQueue(t, Config{Budget: budget})
	fast := newTestQueue(t, Config{Budget: budget})
	require.EqualValues(t, 2, budget.Queues())

	for i := range 10 {
		b := newBuf(p, 1, 100, uint64(i))
		b.Retain()
		_, err := slow.Push(b)
		require.NoError(t, err)
		_, err = fast.Push(b)
		require.NoError(t, err)
		if i < 3 {
			require.EqualValues(t, (i+1)*MinBufferSize, budget.Used(), "a shared buffer counts once")
		}
		require.Equal(t, []uint64{uint64(i)}, drain(fast), "the subscriber that keeps up gets every event")
	}
	s := slow.Stats()
	require.Equal(t, 4, s.Depth, "the laggard keeps what fits in the budget")
	require.EqualValues(t, 6, s.DroppedEvents)
	require.LessOrEqual(t, budget.Used(), budget.Limit())
	require.Len(t, drain(slow), 4)
	require.Zero(t, budget.Used())
	slow.Close()
	fast.Close()
	require.Zero(t, budget.Queues())
}
