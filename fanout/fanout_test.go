package fanout

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// newTestPool returns a private pool and checks, when the test ends, that
// every buffer it handed out came back: the contract the soak test relies
// on (buffers and bytes outstanding return to idle exactly).
func newTestPool(t testing.TB) *Pool {
	t.Helper()
	p := &Pool{}
	t.Cleanup(func() { requireIdle(t, p) })
	return p
}

func requireIdle(t testing.TB, p *Pool) {
	t.Helper()
	s := p.Stats()
	require.Zero(t, s.BuffersOutstanding, "buffers outstanding at end of test")
	require.Zero(t, s.BytesOutstanding, "bytes outstanding at end of test")
}

// newBuf returns a buffer carrying events events in n bytes, tagged with
// offset so tests can tell buffers apart.
func newBuf(p *Pool, events, n int, offset uint64) *Buffer {
	b := p.Get(n)
	b.B = b.B[:n]
	b.Events = events
	b.BaseOffset = offset
	return b
}

// newTestQueue builds a queue that is closed (releasing anything left in
// it) before the pool's idle check runs.
func newTestQueue(t testing.TB, cfg Config) *Queue {
	t.Helper()
	q, err := NewQueue(cfg)
	require.NoError(t, err)
	t.Cleanup(q.Close)
	return q
}

// TestSlowSubscriberNeverSlowsPublisherOrNeighbours proves docs/design.md,
// "Semantics": "a slow subscriber never slows the publisher or its neighbours": one
// publisher fans out to ten DropNew queues, two of which are never drained.
// The publisher only paces itself on the eight healthy subscribers; it
// finishes, the healthy ones receive every buffer in order, and the stuck
// ones hold a full queue and count exactly the rest as dropped.
func TestSlowSubscriberNeverSlowsPublisherOrNeighbours(t *testing.T) {
	const (
		subscribers = 10
		stuck       = 2
		capacity    = 64
		round       = 32
		rounds      = 100
		total       = round * rounds
	)
	p := newTestPool(t)
	queues := make([]*Queue, subscribers)
	for i := range queues {
		queues[i] = newTestQueue(t, Config{Capacity: capacity})
	}
	healthy := queues[stuck:]

	acks := make(chan struct{}, len(healthy))
	received := make([][]uint64, len(healthy))
	var wg sync.WaitGroup
	for i, q := range healthy {
		wg.Go(func() {
			for n := 0; ; n++ {
				b, err := q.Next(context.Background())
				if err != nil {
					return
				}
				received[i] = append(received[i], b.BaseOffset)
				b.Release()
				if n%round == round-1 {
					acks <- struct{}{}
				}
			}
		})
	}

	for r := range rounds {
		for j := range round {
			b := newBuf(p, 1, 16, uint64(r*round+j))
			for qi, q := range queues {
				b.Retain()
				res, err := q.Push(b)
				require.NoError(t, err)
				if qi >= stuck {
					require.Equal(t, Queued, res, "healthy subscriber dropped")
				}
			}
			b.Release()
		}
		for range healthy {
			<-acks
		}
	}
	for _, q := range healthy {
		q.Close()
	}
	wg.Wait()

	for i := range healthy {
		require.Len(t, received[i], total)
		for j, off := range received[i] {
			require.Equal(t, uint64(j), off)
		}
	}
	for _, q := range queues[:stuck] {
		s := q.Stats()
		require.Equal(t, capacity, s.Depth)
		require.Equal(t, uint64(total-capacity), s.DroppedEvents)
		require.Equal(t, uint64(total), s.Pushed)
	}
}

// BenchmarkFanout measures the broker's per-event fan-out: one encoded
// buffer pushed to every subscriber queue and drained by each.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run("queues="+strconv.Itoa(n), func(b *testing.B) {
			p := &Pool{}
			queues := make([]*Queue, n)
			for i := range queues {
				q, err := NewQueue(Config{})
				require.NoError(b, err)
				queues[i] = q
			}
			b.ReportAllocs()
			for b.Loop() {
				buf := newBuf(p, 1, 512, 0)
				for _, q := range queues {
					buf.Retain()
					if _, err := q.Push(buf); err != nil {
						b.Fatal(err)
					}
				}
				buf.Release()
				for _, q := range queues {
					got, _ := q.TryNext()
					got.Release()
				}
			}
			requireIdle(b, p)
		})
	}
}
