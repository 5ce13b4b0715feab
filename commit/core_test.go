package commit

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCorePlansARoundPerModeAndTrigger pins the round decision of the pure
// core: who syncs, and whether the batch completes before the sync.
func TestCorePlansARoundPerModeAndTrigger(t *testing.T) {
	nop := func(error) {}
	for _, tc := range []struct {
		name      string
		mode      Mode
		reserved  bool
		trigger   trigger
		wantSync  bool
		wantEarly bool
	}{
		{"on_commit reserve syncs", OnCommit, true, onReserve, true, false},
		{"on_commit spurious wake does not sync", OnCommit, false, onReserve, false, false},
		{"on_commit flush syncs with nothing staged", OnCommit, false, onFlush, true, false},
		{"periodic reserve completes without sync", Periodic, true, onReserve, false, true},
		{"periodic tick syncs when dirty", Periodic, true, onTick, true, true},
		{"periodic tick skips when clean", Periodic, false, onTick, false, true},
		{"never reserve completes without sync", Never, true, onReserve, false, true},
		{"never flush syncs", Never, true, onFlush, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := core{mode: tc.mode}
			if tc.reserved {
				c.reserve(10, 12, nop)
			}
			st := c.plan(tc.trigger)
			require.Equal(t, tc.wantSync, st.sync)
			require.Equal(t, tc.wantEarly, st.early)
			require.NoError(t, st.err)
		})
	}
}

// TestCoreRecordsTheFirstFailureAndNeverSyncsAgain proves the terminal rule
// at the core: the failure is recorded in finish, and every later plan
// carries it instead of syncing, even for Flush.
func TestCoreRecordsTheFirstFailureAndNeverSyncsAgain(t *testing.T) {
	cause := errors.New("EIO")
	c := core{mode: OnCommit}
	c.reserve(0, 1, func(error) {})
	st := c.plan(onReserve)
	err := c.finish(st, cause)
	require.ErrorIs(t, err, ErrSyncFailed)
	require.ErrorIs(t, err, cause)
	c.recycle(st.batch)

	c.reserve(1, 2, func(error) {})
	st = c.plan(onFlush)
	require.False(t, st.sync)
	require.Same(t, err, st.err)
	require.Same(t, err, c.finish(st, nil))
	require.Len(t, st.batch, 1)
}

// TestCoreStartsAtTheFirstReservedOffset proves a reopened log (first
// offset > 0) does not count its history as records of the first sync.
func TestCoreStartsAtTheFirstReservedOffset(t *testing.T) {
	c := core{mode: OnCommit}
	c.reserve(1000, 1004, func(error) {})
	st := c.plan(onReserve)
	require.Equal(t, uint64(1000), st.from)
	require.Equal(t, uint64(1004), st.tail)
	require.NoError(t, c.finish(st, nil))
	require.Equal(t, uint64(1004), c.synced)
}

// TestCoreReusesItsTwoBuffers proves steady-state Reserve does not allocate:
// the batch in flight and the staging slice alternate.
func TestCoreReusesItsTwoBuffers(t *testing.T) {
	c := core{mode: OnCommit}
	nop := func(error) {}
	var end uint64
	round := func() {
		for range 8 {
			c.reserve(end, end+1, nop)
			end++
		}
		st := c.plan(onReserve)
		require.NoError(t, c.finish(st, nil))
		c.recycle(st.batch)
	}
	round()
	round() // both buffers have grown
	allocs := testing.AllocsPerRun(100, round)
	require.Zero(t, allocs)
}

// TestCoreReserveOutOfOrderPanics proves a broken append-order contract is
// caught as the invariant violation it is rather than reordering acks.
func TestCoreReserveOutOfOrderPanics(t *testing.T) {
	c := core{}
	c.reserve(5, 10, func(error) {})
	require.PanicsWithValue(t, "commit: Reserve [9, 12) out of order: tail is 10", func() {
		c.reserve(9, 12, func(error) {})
	})
	require.Panics(t, func() { c.reserve(20, 19, func(error) {}) })
	require.Panics(t, func() { c.reserve(20, 21, nil) })
	c.reserve(10, 10, func(error) {}) // an empty range in order is fine
	c.reserve(15, 16, func(error) {}) // so is a gap
}
