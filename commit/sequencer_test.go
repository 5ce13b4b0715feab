package commit

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/testutil"
)

// TestOnCommitDoneOnlyAfterASyncThatCoversTheReservation proves the
// on_commit contract (docs/design.md, "Semantics": "an on_commit ack means
// the record survives kill -9"): done never runs before a Sync that began after
// the range was reserved has returned, and a range reserved while a sync runs
// waits for the next one.
func TestOnCommitDoneOnlyAfterASyncThatCoversTheReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newGatedLog()
		s := newSequencer(t, Config{Mode: OnCommit, Syncer: log})
		a := &appender{log: log, seq: s}

		var r1, r2 result
		a.append(t, 3, r1.done(log))
		synctest.Wait()
		require.Equal(t, []uint64{3}, log.starts(), "one sync, started after [0,3) was appended")
		require.Zero(t, r1.calls.Load(), "done ran while the covering sync was still running")

		a.append(t, 2, r2.done(log)) // staged while sync 1 runs: sync 1 may not cover it
		log.release <- nil
		synctest.Wait()
		require.Equal(t, int32(1), r1.calls.Load())
		require.NoError(t, r1.err)
		require.GreaterOrEqual(t, r1.durable, uint64(3))
		require.Zero(t, r2.calls.Load(), "done ran on a sync that began before its reservation")
		require.Equal(t, []uint64{3, 5}, log.starts())

		log.release <- nil
		synctest.Wait()
		require.Equal(t, int32(1), r2.calls.Load())
		require.NoError(t, r2.err)
		require.GreaterOrEqual(t, r2.durable, uint64(5))
		log.ungate()
		require.NoError(t, s.Close())
	})
}

// TestOnCommitOneSyncCoversManyWaiters proves group commit (docs/design.md,
// "Storage": "one sync serves every waiter staged before it"): while a sync
// runs, 50 reservations accumulate, and the next single sync releases all 50.
func TestOnCommitOneSyncCoversManyWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newGatedLog()
		s := newSequencer(t, Config{Mode: OnCommit, Syncer: log})
		a := &appender{log: log, seq: s}

		var first result
		a.append(t, 1, first.done(log))
		synctest.Wait() // sync 1 is parked
		rs := make([]result, 50)
		for i := range rs {
			a.append(t, 2, rs[i].done(log))
		}
		log.release <- nil // sync 1 releases the first reservation only
		synctest.Wait()
		require.Equal(t, int32(1), first.calls.Load())
		for i := range rs {
			require.Zero(t, rs[i].calls.Load())
		}
		log.release <- nil // sync 2 covers all 50
		synctest.Wait()
		for i := range rs {
			require.Equal(t, int32(1), rs[i].calls.Load())
			require.NoError(t, rs[i].err)
		}
		require.Equal(t, []uint64{1, 101}, log.starts())

		st := s.Stats()
		require.Equal(t, uint64(2), st.Syncs)
		require.Equal(t, uint64(2), st.WaitersPerSync.Count)
		require.Equal(t, uint64(51), st.WaitersPerSync.Sum)
		require.Equal(t, uint64(1), st.WaitersPerSync.Buckets[bits.Len64(50)], "one sync released 50 waiters")
		require.Equal(t, uint64(101), st.RecordsPerSync.Sum)
		require.Equal(t, uint64(51), st.Reservations)
		require.Equal(t, uint64(101), st.Records)
		log.ungate()
		require.NoError(t, s.Close())
	})
}

// TestOnCommitMaxDelayCoalescesIntoOneSync proves the optional coalescing
// wait: with MaxDelay set, reservations made within it share one sync.
func TestOnCommitMaxDelayCoalescesIntoOneSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &fakeLog{}
		s := newSequencer(t, Config{Mode: OnCommit, Syncer: log, MaxDelay: time.Millisecond})
		a := &appender{log: log, seq: s}
		var r1, r2 result
		a.append(t, 1, r1.done(log))
		synctest.Wait()
		require.Empty(t, log.starts(), "synced before MaxDelay elapsed")
		a.append(t, 1, r2.done(log))
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, []uint64{2}, log.starts())
		require.Equal(t, int32(1), r1.calls.Load())
		require.Equal(t, int32(1), r2.calls.Load())
		require.NoError(t, s.Close())
	})
}

// TestSyncFailureIsTerminal proves docs/design.md, "Storage" ("a failed sync is
// terminal ... it never acks what it could not make durable"), in every
// mode: the reservations the failed sync was to cover and every later one
// complete with ErrSyncFailed wrapping the cause, no done(nil) follows, no
// sync is retried, and Flush, Close, Err and Reserve-after-Close report it.
func TestSyncFailureIsTerminal(t *testing.T) {
	for _, mode := range []Mode{OnCommit, Periodic, Never} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testSyncFailureIsTerminal(t, mode) })
		})
	}
}

func testSyncFailureIsTerminal(t *testing.T, mode Mode) {
	cause := errors.New("EIO")
	log := newGatedLog()
	s := newSequencer(t, Config{Mode: mode, Syncer: log, Interval: time.Hour})
	a := &appender{log: log, seq: s}

	var okAfter atomic.Bool // set if any done(nil) follows a failure
	var failed atomic.Bool
	var errs []error
	done := func(err error) {
		if err == nil && failed.Load() {
			okAfter.Store(true)
		}
		if err != nil {
			failed.Store(true)
		}
		errs = append(errs, err)
	}
	a.append(t, 1, done)
	flushed := make(chan error, 1)
	if mode != OnCommit {
		synctest.Wait()
		go func() { flushed <- s.Flush() }() // the only way to sync before an hour
	}
	synctest.Wait() // the failing sync is parked
	a.append(t, 1, done)
	a.append(t, 1, done)
	log.release <- cause
	synctest.Wait()
	a.append(t, 1, done) // after the failure is known
	synctest.Wait()

	require.ErrorIs(t, s.Err(), ErrSyncFailed)
	require.ErrorIs(t, s.Err(), cause)
	if mode != OnCommit {
		require.ErrorIs(t, <-flushed, cause)
	}
	require.ErrorIs(t, s.Flush(), ErrSyncFailed)
	require.ErrorIs(t, s.Close(), ErrSyncFailed)
	require.ErrorIs(t, s.Close(), cause, "a second Close reports the same")
	require.Len(t, log.starts(), 1, "a failed sync was retried")
	require.Len(t, errs, 4)
	require.False(t, okAfter.Load(), "done(nil) after a failure")
	// In OnCommit nothing was durable; in the other modes the first
	// reservations were acknowledged before the sync, as those modes promise.
	for i, err := range errs {
		if mode == OnCommit || i == 3 {
			require.ErrorIs(t, err, ErrSyncFailed, "reservation %d", i)
			require.ErrorIs(t, err, cause, "reservation %d", i)
		}
	}
	err := s.Reserve(4, 5, func(error) { t.Fatal("done called after Close") })
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, ErrSyncFailed)
	require.ErrorIs(t, s.Flush(), ErrClosed)
	st := s.Stats()
	require.Equal(t, uint64(1), st.SyncErrors)
	require.Zero(t, st.Syncs)
	require.Equal(t, uint64(4), st.Reservations)
}

// TestPeriodicSyncsAtTheIntervalOnlyWhenSomethingWasAppended proves the
// periodic mode: reservations complete without a sync, a sync happens at
// each interval in which something was reserved and not otherwise.
func TestPeriodicSyncsAtTheIntervalOnlyWhenSomethingWasAppended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &fakeLog{}
		s := newSequencer(t, Config{Syncer: log}) // zero Mode = Periodic, 250 ms
		a := &appender{log: log, seq: s}

		var r result
		a.append(t, 5, r.done(log))
		synctest.Wait()
		require.Equal(t, int32(1), r.calls.Load(), "periodic reservation waited for a sync")
		require.NoError(t, r.err)
		require.Zero(t, r.durable)
		require.Empty(t, log.starts())

		time.Sleep(DefaultInterval - time.Nanosecond)
		synctest.Wait()
		require.Empty(t, log.starts(), "synced before the interval")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, []uint64{5}, log.starts())

		time.Sleep(10 * DefaultInterval)
		synctest.Wait()
		require.Len(t, log.starts(), 1, "synced with nothing appended")

		a.append(t, 1, r.done(log))
		time.Sleep(DefaultInterval)
		synctest.Wait()
		require.Equal(t, []uint64{5, 6}, log.starts())
		st := s.Stats()
		require.Equal(t, uint64(2), st.Syncs)
		require.Equal(t, uint64(6), st.RecordsPerSync.Sum)
		require.Zero(t, st.WaitersPerSync.Sum, "periodic reservations never wait")
		require.NoError(t, s.Close())
		require.Len(t, log.starts(), 3, "Close makes a final sync")
	})
}

// TestNeverSyncsOnlyOnClose proves the never mode: reservations complete at
// once, time passing syncs nothing, and Close syncs exactly once.
func TestNeverSyncsOnlyOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &fakeLog{}
		s := newSequencer(t, Config{Mode: Never, Syncer: log})
		a := &appender{log: log, seq: s}
		rs := make([]result, 10)
		for i := range rs {
			a.append(t, 1, rs[i].done(log))
		}
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		for i := range rs {
			require.Equal(t, int32(1), rs[i].calls.Load())
		}
		require.Empty(t, log.starts())
		require.NoError(t, s.Close())
		require.NoError(t, s.Close())
		require.Equal(t, []uint64{10}, log.starts())
	})
}

// TestFlushSyncsAndWaitsInEveryMode proves Flush syncs now, covering what
// was reserved before it, even in Never mode and with nothing reserved.
func TestFlushSyncsAndWaitsInEveryMode(t *testing.T) {
	for _, mode := range []Mode{OnCommit, Periodic, Never} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &fakeLog{}
				s := newSequencer(t, Config{Mode: mode, Syncer: log, Interval: time.Hour})
				require.NoError(t, s.Flush())
				require.Len(t, log.starts(), 1)
				a := &appender{log: log, seq: s}
				a.append(t, 7, func(error) {})
				require.NoError(t, s.Flush())
				require.Equal(t, uint64(7), log.durable.Load())
				require.NoError(t, s.Close())
				require.ErrorIs(t, s.Flush(), ErrClosed)
			})
		})
	}
}

// TestCloseCompletesEverythingIsIdempotentAndStopsTheGoroutine proves the
// goroutine-ownership rule (docs/design.md, "House style"): Close makes the final sync,
// completes every staged reservation exactly once, refuses new ones, can be
// called again (concurrently too), and leaves no goroutine behind.
func TestCloseCompletesEverythingIsIdempotentAndStopsTheGoroutine(t *testing.T) {
	for _, mode := range []Mode{OnCommit, Periodic, Never} {
		t.Run(mode.String(), func(t *testing.T) {
			before := testutil.Goroutines()
			log := newGatedLog()
			s := newSequencer(t, Config{Mode: mode, Syncer: log})
			a := &appender{log: log, seq: s}
			rs := make([]result, 100)
			for i := range rs {
				a.append(t, 1, rs[i].done(log))
			}
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() { require.NoError(t, s.Close()) })
			}
			// Release syncs until Close is through; every one is a sync the
			// sequencer asked for (OnCommit rounds, then the final one).
			closed := make(chan struct{})
			go func() { wg.Wait(); close(closed) }()
		release:
			for {
				select {
				case log.release <- nil:
				case <-closed:
					break release
				}
			}
			for i := range rs {
				require.Equal(t, int32(1), rs[i].calls.Load(), "reservation %d", i)
				require.NoError(t, rs[i].err)
			}
			require.Equal(t, uint64(100), log.durable.Load(), "Close did not make the final sync")
			require.ErrorIs(t, s.Reserve(100, 101, func(error) { t.Fatal("done after Close") }), ErrClosed)
			require.NoError(t, s.Close())
			testutil.GoroutinesSettle(t, before, 5*time.Second)
		})
	}
}

// TestConcurrentReservationsCompleteOnceInOrderNeverConcurrently is the
// stress test for the commit-sequencer contract (post-flush work in
// disk-offset order): 64 writers reserve under a shared
// append lock and wait; every done runs exactly once, in offset order, one
// at a time, and in OnCommit only after its range is durable. Run it with
// -race.
//
// With InlineCallbacks the flusher runs batches itself while the completer
// has nothing queued, and hands them to the completer otherwise: the same
// contract holds across the two.
func TestConcurrentReservationsCompleteOnceInOrderNeverConcurrently(t *testing.T) {
	for _, mode := range []Mode{OnCommit, Periodic, Never} {
		for _, inline := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/inline=%v", mode, inline), func(t *testing.T) {
				concurrentReservations(t, mode, inline)
			})
		}
	}
}

func concurrentReservations(t *testing.T, mode Mode, inline bool) {
	const writers, each = 64, 160 // 10,240 reservations
	log := &fakeLog{}
	s := newSequencer(t, Config{Mode: mode, Syncer: log, Interval: time.Millisecond, InlineCallbacks: inline})
	a := &appender{log: log, seq: s}

	var inCallback atomic.Bool
	var next uint64 // end of the last completed range; only callbacks touch it
	var calls, overlaps, outOfOrder, early, failures atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			ch := make(chan error, 1)
			for i := range each {
				n := uint64(1 + (w+i)%3)
				err := a.appendRange(n, func(first, end uint64) func(error) {
					return func(err error) {
						if !inCallback.CompareAndSwap(false, true) {
							overlaps.Add(1)
						}
						if first != next {
							outOfOrder.Add(1)
						}
						next = end
						if mode == OnCommit && log.durable.Load() < end {
							early.Add(1)
						}
						calls.Add(1)
						inCallback.Store(false)
						ch <- err
					}
				})
				if err == nil {
					err = <-ch
				}
				if err != nil {
					failures.Add(1)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.Close())
	require.Zero(t, failures.Load())
	require.Equal(t, int64(writers*each), calls.Load())
	require.Zero(t, overlaps.Load(), "callbacks ran concurrently")
	require.Zero(t, outOfOrder.Load(), "callbacks ran out of reservation order")
	require.Zero(t, early.Load(), "on_commit done before its range was durable")
	st := s.Stats()
	require.Equal(t, uint64(writers*each), st.Reservations)
	require.Equal(t, log.written.Load(), st.Records)
	t.Logf("%v: %d syncs, %.1f waiters/sync, p99 %d", mode, st.Syncs,
		st.WaitersPerSync.Mean(), st.WaitersPerSync.Quantile(0.99))
}
