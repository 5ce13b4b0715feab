package commit

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// slowLog is a Syncer whose every sync takes a fixed (bubble) time.
type slowLog struct{ d time.Duration }

func (l slowLog) Sync() error { time.Sleep(l.d); return nil }

// TestOnCommitClosedLoopWritersShareEverySync proves gather: writers that
// re-reserve as soon as their done runs must all share each sync, instead
// of splitting into two halves that alternate between syncs (which was 4
// waiters per sync for 8 writers before gather existed).
func TestOnCommitClosedLoopWritersShareEverySync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const writers, rounds = 8, 50
		s := newSequencer(t, Config{Mode: OnCommit, Syncer: slowLog{time.Millisecond}})
		var (
			mu   sync.Mutex
			next uint64
			wg   sync.WaitGroup
		)
		for range writers {
			wg.Go(func() {
				ch := make(chan error, 1)
				for range rounds {
					mu.Lock()
					err := s.Reserve(next, next+1, func(err error) { ch <- err })
					next++
					mu.Unlock()
					require.NoError(t, err)
					require.NoError(t, <-ch)
				}
			})
		}
		wg.Wait()
		st := s.Stats()
		require.NoError(t, s.Close())
		// Without gather this is writers/2 (the halves alternate). With it,
		// most syncs cover all writers; a few cover fewer when the Go
		// scheduler runs a released writer on the other P past gather's
		// yields (seen in CI: 56 syncs for 50 rounds, 7.1 per sync), so the
		// bound sits between the two regimes, not at the ideal.
		mean := float64(st.WaitersPerSync.Sum) / float64(st.WaitersPerSync.Count)
		if raceEnabled {
			// Seen under -race in CI: 5.97 (67 syncs); the run still checks for races.
			t.Logf("waiters per sync %.2f (syncs %d); not asserted under the race detector", mean, st.Syncs)
			return
		}
		require.Greater(t, mean, float64(writers)*0.75, "waiters per sync (syncs %d)", st.Syncs)
	})
}

// TestOnCommitLoneWriterDoesNotWait proves gather costs a lone writer
// nothing: with one waiter per sync it returns without yielding, so each
// round is one sync long.
func TestOnCommitLoneWriterDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSequencer(t, Config{Mode: OnCommit, Syncer: slowLog{time.Millisecond}})
		ch := make(chan error, 1)
		start := time.Now()
		for i := range uint64(20) {
			require.NoError(t, s.Reserve(i, i+1, func(err error) { ch <- err }))
			require.NoError(t, <-ch)
		}
		require.Equal(t, 20*time.Millisecond, time.Since(start))
		require.NoError(t, s.Close())
	})
}

// TestSyncsContinueWhileACallbackBlocks proves the completer split: a
// callback that waits (fanout to a full Block subscriber) holds up later
// callbacks but not later syncs, and callbacks still run in order.
func TestSyncsContinueWhileACallbackBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSequencer(t, Config{Mode: OnCommit, Syncer: slowLog{time.Millisecond}})
		unblock := make(chan struct{})
		var order []uint64
		var mu sync.Mutex
		done := func(i uint64) func(error) {
			return func(err error) {
				require.NoError(t, err)
				if i == 0 {
					<-unblock
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}
		}
		require.NoError(t, s.Reserve(0, 1, done(0)))
		synctest.Wait() // synced; its callback now blocks
		for i := uint64(1); i < 4; i++ {
			require.NoError(t, s.Reserve(i, i+1, done(i)))
			time.Sleep(2 * time.Millisecond) // one sync each
		}
		require.Equal(t, uint64(4), s.Stats().Syncs, "syncs went on behind the blocked callback")
		mu.Lock()
		require.Empty(t, order, "no callback overtook the blocked one")
		mu.Unlock()
		close(unblock)
		require.NoError(t, s.Close())
		require.Equal(t, []uint64{0, 1, 2, 3}, order)
	})
}

// TestGatherEstimateSkipsGathersThatBringNothing: writers that come back
// after a network round trip are never caught by a gather, so once gathers
// have brought nothing in, the flusher syncs at once, trying again every
// gatherProbe-th time; writers in this process, which are caught within a
// few yields, keep it gathering.
func TestGatherEstimateSkipsGathersThatBringNothing(t *testing.T) {
	const sync = 300 * time.Microsecond
	var g gatherEstimate
	require.True(t, g.pays(4, sync), "nothing learned yet")
	for range 8 {
		g.learn(0, 30*time.Microsecond)
	}
	for i := 1; i < gatherProbe; i++ {
		require.False(t, g.pays(4, sync), "chance %d", i)
	}
	require.True(t, g.pays(4, sync), "the probe")
	require.False(t, g.pays(4, sync))

	// One gather in ten catches a writer, each takes 40 µs, four staged:
	// ~0.1 × 300 µs saved < 4 × 40 µs waited.
	g = gatherEstimate{}
	for i := range 50 {
		caught := 0
		if i%10 == 9 {
			caught = 1
		}
		g.learn(caught, 40*time.Microsecond)
	}
	require.False(t, g.pays(4, sync))

	// In-process writers: several caught in a few µs each time.
	g = gatherEstimate{}
	for range 8 {
		g.learn(6, 5*time.Microsecond)
	}
	require.True(t, g.pays(30, sync))
	require.True(t, g.pays(30, sync))
}
