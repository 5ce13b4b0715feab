//go:build linux

package cpuprofile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"

	"github.com/felixmq/felix/internal/linux"
)

// procDir is the /proc directory of pid; 0 means the calling process.
func procDir(pid int) string {
	if pid == 0 {
		return "/proc/self"
	}
	return "/proc/" + strconv.Itoa(pid)
}

// Threads returns the CPU account of every OS thread of process pid (0 for
// the calling process), in ascending TID order. Threads that exit while the
// directory is read are left out.
func Threads(pid int) ([]Thread, error) {
	dir := procDir(pid) + "/task"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: threads: %w", err)
	}
	threads := make([]Thread, 0, len(entries))
	for _, e := range entries {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if errors.Is(err, fs.ErrNotExist) || linux.IsNoSuchProcess(err) {
			continue // exited since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("cpuprofile: threads: %w", err)
		}
		s, err := parseStat(b)
		if err != nil {
			return nil, fmt.Errorf("%s/%s/stat: %w", dir, e.Name(), err)
		}
		threads = append(threads, s.thread())
	}
	// ReadDir sorts by name, which puts TID 10 before 9.
	slices.SortFunc(threads, func(a, b Thread) int { return a.TID - b.TID })
	return threads, nil
}

// Process returns the CPU account of process pid (0 for the calling
// process), exited threads included.
func Process(pid int) (ProcessCPU, error) {
	path := procDir(pid) + "/stat"
	b, err := os.ReadFile(path)
	if err != nil {
		return ProcessCPU{}, fmt.Errorf("cpuprofile: process: %w", err)
	}
	s, err := parseStat(b)
	if err != nil {
		return ProcessCPU{}, fmt.Errorf("%s: %w", path, err)
	}
	return s.process(), nil
}

// System returns /proc/stat: CPU time since boot, summed and per CPU.
func System() (SystemCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return SystemCPU{}, fmt.Errorf("cpuprofile: system: %w", err)
	}
	return parseSystemStat(b)
}

// Memory returns the resident memory of process pid (0 for the calling
// process) from /proc/PID/status.
func Memory(pid int) (ProcessMemory, error) {
	path := procDir(pid) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return ProcessMemory{}, fmt.Errorf("cpuprofile: memory: %w", err)
	}
	m, err := parseStatus(b)
	if err != nil {
		return ProcessMemory{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
