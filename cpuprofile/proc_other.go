//go:build !linux

package cpuprofile

import "fmt"

// Threads needs Linux's /proc/PID/task.
func Threads(pid int) ([]Thread, error) {
	return nil, fmt.Errorf("%w: per-thread CPU needs /proc/PID/task", ErrNotSupported)
}

// Process needs Linux's /proc/PID/stat.
func Process(pid int) (ProcessCPU, error) {
	return ProcessCPU{}, fmt.Errorf("%w: process CPU needs /proc/PID/stat", ErrNotSupported)
}

// System needs Linux's /proc/stat.
func System() (SystemCPU, error) {
	return SystemCPU{}, fmt.Errorf("%w: system CPU needs /proc/stat", ErrNotSupported)
}

// Memory needs Linux's /proc/PID/status.
func Memory(pid int) (ProcessMemory, error) {
	return ProcessMemory{}, fmt.Errorf("%w: process memory needs /proc/PID/status", ErrNotSupported)
}
