//go:build linux

package linux

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Gettid is gettid(2): the id of the calling OS thread.
func Gettid() int { return unix.Gettid() }

// SchedSetaffinity restricts the calling OS thread to cpus
// (sched_setaffinity(2) with pid 0). The caller must hold the thread
// (runtime.LockOSThread) or the setting lands on whatever thread the
// goroutine happens to run on.
func SchedSetaffinity(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity %v: %w", cpus, err)
	}
	return nil
}

// SchedGetaffinity returns the CPUs the calling OS thread may run on.
func SchedGetaffinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// SetThreadName names the calling OS thread (prctl(2) PR_SET_NAME; the
// kernel keeps 15 bytes). It shows in /proc/self/task/*/comm, top -H, perf.
func SetThreadName(name string) error {
	b := make([]byte, 16)
	copy(b[:15], name)
	// The pointer conversion sits in the Syscall6 argument list, where the
	// compiler keeps b alive and in place (unsafe.Pointer rule 4).
	if _, _, e := unix.Syscall6(unix.SYS_PRCTL, unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("prctl PR_SET_NAME: %w", e)
	}
	return nil
}

// ThreadName returns the calling OS thread's name (PR_GET_NAME).
func ThreadName() (string, error) {
	b := make([]byte, 16)
	if _, _, e := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0, 0); e != 0 {
		return "", fmt.Errorf("prctl PR_GET_NAME: %w", e)
	}
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n]), nil
}

// ProcessCPUTime is the user plus system CPU time the process has used
// (getrusage(2) RUSAGE_SELF).
func ProcessCPUTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
