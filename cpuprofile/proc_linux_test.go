//go:build linux

package cpuprofile

import (
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/linux"
	"github.com/stretchr/testify/require"
)

func threadByTID(threads []Thread, tid int) (Thread, bool) {
	for _, th := range threads {
		if th.TID == tid {
			return th, true
		}
	}
	return Thread{}, false
}

// The per-thread figures must land on the thread that burnt the CPU: that
// is what makes a hot felix-io-N visible.
func TestThreadsSeesBusyThread(t *testing.T) {
	type result struct {
		tid           int
		before, after []Thread
		errs          [2]error
		wall          time.Duration
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r := result{tid: linux.Gettid()}
		r.before, r.errs[0] = Threads(0)
		start := time.Now()
		for x := uint64(1); time.Since(start) < 200*time.Millisecond; x = x*6364136223846793005 + 1 {
		}
		r.wall = time.Since(start)
		r.after, r.errs[1] = Threads(0)
		done <- r
	}()
	r := <-done
	require.NoError(t, r.errs[0])
	require.NoError(t, r.errs[1])
	before, ok := threadByTID(r.before, r.tid)
	require.True(t, ok, "thread %d not in /proc/self/task", r.tid)
	after, ok := threadByTID(r.after, r.tid)
	require.True(t, ok, "thread %d gone from /proc/self/task", r.tid)
	burnt := after.User + after.System - before.User - before.System
	t.Logf("thread %d (%s) used %v of CPU in %v", after.TID, after.Name, burnt, r.wall)
	require.Equal(t, before.Start, after.Start)
	require.Greater(t, burnt, 50*time.Millisecond)
	// Ticks are 10 ms and the readings are not atomic with the clock.
	require.LessOrEqual(t, burnt, r.wall+20*time.Millisecond)
}

func TestProcessAndSystem(t *testing.T) {
	p, err := Process(0)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), p.PID)
	require.Positive(t, p.Threads)

	sys, err := System()
	require.NoError(t, err)
	require.NotEmpty(t, sys.CPUs)
	require.Positive(t, sys.Total.Idle+sys.Total.User)

	_, err = Threads(1 << 30) // beyond pid_max
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestSamplerSeesItsOwnProcess(t *testing.T) {
	s, err := NewSampler(0)
	require.NoError(t, err)
	start := time.Now()
	for x := uint64(1); time.Since(start) < 100*time.Millisecond; x = x*6364136223846793005 + 1 {
	}
	sample, err := s.Sample()
	require.NoError(t, err)
	require.GreaterOrEqual(t, sample.Interval, 100*time.Millisecond)
	require.Greater(t, sample.Process.User+sample.Process.System, 0.05) // loose: the machine may be busy
	require.NotEmpty(t, sample.Threads)
	require.NotEmpty(t, sample.CPUs)
	t.Logf("process %.2f user %.2f system; system %+v", sample.Process.User, sample.Process.System, sample.System)
}

func TestThreadsAscendingTID(t *testing.T) {
	threads, err := Threads(0)
	require.NoError(t, err)
	require.True(t, slices.IsSortedFunc(threads, func(a, b Thread) int { return a.TID - b.TID }))
}
