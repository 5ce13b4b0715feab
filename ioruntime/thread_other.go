//go:build !linux

package ioruntime

import (
	"fmt"
	"runtime"
)

// affinitySupported is false: New refuses a CPU list here.
const affinitySupported = false

type pinned struct{}

// pin only locks the goroutine to its OS thread: naming and affinity are
// Linux-only. A CPU list never gets here (New refuses it).
func pin(name string, cpus []int) (*pinned, error) {
	runtime.LockOSThread()
	if len(cpus) > 0 {
		return &pinned{}, fmt.Errorf("%w: CPU affinity", ErrNotSupported)
	}
	return &pinned{}, nil
}

func (p *pinned) restore() { runtime.UnlockOSThread() }

// currentThread is not available here.
func currentThread() (tid int, name string, cpus []int, err error) {
	return 0, "", nil, fmt.Errorf("%w: thread introspection", ErrNotSupported)
}
