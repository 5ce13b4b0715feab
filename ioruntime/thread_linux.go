//go:build linux

package ioruntime

import (
	"runtime"

	"github.com/felixmq/felix/internal/linux"
)

const affinitySupported = true

// pinned is what pin changed on the OS thread, so restore can undo it.
type pinned struct {
	oldName string
	oldCPUs []int
	named   bool
	bound   bool
}

// pin locks the goroutine to its OS thread, names the thread and, with cpus,
// restricts it to them. The goroutine stays locked even when naming or
// affinity fails (the error says which); restore is always safe to call.
func pin(name string, cpus []int) (*pinned, error) {
	runtime.LockOSThread()
	p := &pinned{}
	var firstErr error
	if old, err := linux.ThreadName(); err == nil {
		if err := linux.SetThreadName(name); err == nil {
			p.oldName, p.named = old, true
		} else {
			firstErr = err
		}
	} else {
		firstErr = err
	}
	if len(cpus) > 0 {
		old, err := linux.SchedGetaffinity()
		if err == nil {
			err = linux.SchedSetaffinity(cpus)
		}
		if err == nil {
			p.oldCPUs, p.bound = old, true
		} else if firstErr == nil {
			firstErr = err
		}
	}
	return p, firstErr
}

// restore puts the thread's name and affinity back and unlocks it. If that
// fails the goroutine stays locked, so the runtime retires the OS thread
// when the goroutine exits instead of handing a mis-pinned thread to others.
func (p *pinned) restore() {
	ok := true
	if p.bound && linux.SchedSetaffinity(p.oldCPUs) != nil {
		ok = false
	}
	if p.named && linux.SetThreadName(p.oldName) != nil {
		ok = false
	}
	if ok {
		runtime.UnlockOSThread()
	}
}

// currentThread reports the calling OS thread's id, name and CPUs, for tests.
func currentThread() (tid int, name string, cpus []int, err error) {
	name, err = linux.ThreadName()
	if err != nil {
		return 0, "", nil, err
	}
	cpus, err = linux.SchedGetaffinity()
	return linux.Gettid(), name, cpus, err
}
