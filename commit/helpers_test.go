package commit

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeLog stands in for segment.Log: Append advances what the log holds,
// Sync records where the log stood when the sync began and, once the sync
// returns nil, treats that much as durable. A gated fakeLog parks every Sync
// until the test sends its result on release.
type fakeLog struct {
	written atomic.Uint64 // records appended so far
	durable atomic.Uint64 // records covered by a completed successful Sync
	release chan error    // nil: Sync returns nil at once
	opened  chan struct{} // closed by ungate: gated syncs return nil at once
	fail    error         // returned by an ungated Sync

	mu struct {
		sync.Mutex
		starts []uint64 // written at the start of each Sync
	}
}

func newGatedLog() *fakeLog {
	return &fakeLog{release: make(chan error), opened: make(chan struct{})}
}

// ungate lets every later Sync of a gated log return nil without waiting,
// typically before Close's final sync.
func (f *fakeLog) ungate() { close(f.opened) }

func (f *fakeLog) Sync() error {
	w := f.written.Load()
	f.mu.Lock()
	f.mu.starts = append(f.mu.starts, w)
	f.mu.Unlock()
	err := f.fail
	if f.release != nil {
		select {
		case err = <-f.release:
		case <-f.opened:
		}
	}
	if err == nil {
		for d := f.durable.Load(); d < w && !f.durable.CompareAndSwap(d, w); d = f.durable.Load() {
		}
	}
	return err
}

func (f *fakeLog) starts() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.mu.starts...)
}

// appender is the caller side: it appends n records and reserves them under
// one lock, as the broker does under the log's append lock.
type appender struct {
	mu  sync.Mutex
	log *fakeLog
	seq *Sequencer
}

// append appends n records, reserves them and returns their range.
func (a *appender) append(t testing.TB, n uint64, done func(error)) (first, end uint64) {
	t.Helper()
	err := a.appendRange(n, func(f, e uint64) func(error) {
		first, end = f, e
		return done
	})
	require.NoError(t, err)
	return first, end
}

// appendRange appends n records and reserves them with the callback mk
// builds for their range; it is safe to call from any goroutine.
func (a *appender) appendRange(n uint64, mk func(first, end uint64) func(error)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := a.log.written.Load()
	end := first + n
	a.log.written.Store(end)
	return a.seq.Reserve(first, end, mk(first, end))
}

// result collects the outcome of one reservation.
type result struct {
	calls   atomic.Int32
	err     error
	durable uint64 // fakeLog.durable when done ran
}

func (r *result) done(f *fakeLog) func(error) {
	return func(err error) {
		r.err = err
		r.durable = f.durable.Load()
		r.calls.Add(1)
	}
}

func newSequencer(t testing.TB, cfg Config) *Sequencer {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}
