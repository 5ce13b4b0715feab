package ioruntime

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/linux"
)

func TestThreadIndexIsDeterministicByRole(t *testing.T) {
	for _, tc := range []struct {
		n       int
		role    Role
		ordinal int
		want    int
	}{
		{0, RoleServer, 0, -1},
		{1, RoleServer, 0, 0},
		{1, RoleClient, 5, 0},
		{2, RoleServer, 0, 0},
		{2, RoleServer, 1, 1},
		{2, RoleClient, 0, 0}, // 1*2/3 = 0: with 2 threads client shares with server
		{2, RoleForwarder, 0, 1},
		{3, RoleServer, 0, 0},
		{3, RoleClient, 0, 1},
		{3, RoleForwarder, 0, 2},
		{3, RoleForwarder, 1, 0},
		{6, RoleClient, 1, 3},
		{6, RoleForwarder, 3, 1},
		{4, Role(99), 1, 1}, // unknown roles fall back to server
	} {
		require.Equal(t, tc.want, ThreadIndex(tc.n, tc.role, tc.ordinal), "%+v", tc)
	}
}

func TestZeroThreadsMeansInline(t *testing.T) {
	r, err := New(Config{})
	require.NoError(t, err)
	require.Empty(t, r.Threads())
	require.Nil(t, r.Assign(RoleServer, 0))
	require.NoError(t, r.Close())
}

func TestConfigValidation(t *testing.T) {
	_, err := New(Config{Threads: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New(Config{CPUs: []int{0}})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New(Config{Threads: 1, CPUs: []int{4096}})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New(Config{Threads: 1, CPUs: []int{0}})
	if !linux.Supported {
		require.ErrorIs(t, err, ErrNotSupported)
	} else {
		require.NoError(t, err)
	}
}

func TestThreadNamesAndAssignment(t *testing.T) {
	r, err := New(Config{Threads: 3})
	require.NoError(t, err)
	defer r.Close()
	require.Len(t, r.Threads(), 3)
	require.Equal(t, "felix-io-0", r.Threads()[0].Name())
	require.Equal(t, "felix-io-2", r.Assign(RoleForwarder, 0).Name())
	require.Same(t, r.Assign(RoleClient, 0), r.Assign(RoleClient, 3))
}

// TestGoPinsNamesAndRestores: the loop runs on a thread named after its
// logical thread and bound to its CPU; afterwards the OS thread has its old
// name and affinity back.
func TestGoPinsNamesAndRestores(t *testing.T) {
	if !linux.Supported {
		t.Skip("thread names and affinity are Linux-only")
	}
	allowed, err := linux.SchedGetaffinity()
	require.NoError(t, err)
	cpu := allowed[len(allowed)-1]
	r, err := New(Config{Threads: 2, CPUs: []int{cpu}})
	require.NoError(t, err)
	th := r.Assign(RoleServer, 1)

	type seen struct {
		name string
		cpus []int
		err  error
	}
	in := make(chan seen, 1)
	after := make(chan seen, 1)
	go func() {
		// Hold the thread across the pinned run so that the check afterwards
		// looks at the very OS thread the loop ran on.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, name0, cpus0, err := currentThread()
		th.run(func() {
			_, name, cpus, err := currentThread()
			in <- seen{name, cpus, err}
		})
		_, name1, cpus1, err1 := currentThread()
		if err == nil && (name1 != name0 || len(cpus1) != len(cpus0)) {
			err1 = errors.New("thread not restored: " + name1)
		}
		after <- seen{name1, cpus1, err1}
	}()
	s := <-in
	require.NoError(t, s.err)
	require.Equal(t, "felix-io-1", s.name)
	require.Equal(t, []int{cpu}, s.cpus)
	s = <-after
	require.NoError(t, s.err)
	require.Equal(t, allowed, s.cpus)
	require.NoError(t, r.Close())
}

func TestGoRunsLoopAndCloseWaits(t *testing.T) {
	r, err := New(Config{Threads: 1})
	require.NoError(t, err)
	release := make(chan struct{})
	started := make(chan string, 1)
	done, err := r.Threads()[0].Go(func() {
		_, name, _, _ := currentThread()
		started <- name
		<-release
	})
	require.NoError(t, err)
	name := <-started
	if linux.Supported {
		require.Equal(t, "felix-io-0", name)
	}
	close(release)
	<-done
	require.NoError(t, r.Close())
	_, err = r.Threads()[0].Go(func() {})
	require.ErrorIs(t, err, ErrClosed)
}
