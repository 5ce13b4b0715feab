//go:build !linux

package linux

import (
	"fmt"
	"time"
)

// Gettid has no portable equivalent; it returns 0.
func Gettid() int { return 0 }

// SchedSetaffinity is Linux-only.
func SchedSetaffinity(cpus []int) error {
	return fmt.Errorf("%w: sched_setaffinity", ErrNotSupported)
}

// SchedGetaffinity is Linux-only.
func SchedGetaffinity() ([]int, error) {
	return nil, fmt.Errorf("%w: sched_getaffinity", ErrNotSupported)
}

// SetThreadName is Linux-only.
func SetThreadName(name string) error {
	return fmt.Errorf("%w: thread names", ErrNotSupported)
}

// ThreadName is Linux-only.
func ThreadName() (string, error) {
	return "", fmt.Errorf("%w: thread names", ErrNotSupported)
}

// ProcessCPUTime is not implemented here.
func ProcessCPUTime() (time.Duration, error) {
	return 0, fmt.Errorf("%w: getrusage", ErrNotSupported)
}
