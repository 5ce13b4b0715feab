package cpuprofile

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"
)

// userHZ is the unit of every tick count in /proc/PID/stat and /proc/stat.
// It is USER_HZ, part of the kernel ABI (include/asm-generic/param.h) and
// 100 on every architecture Go supports on Linux whatever CONFIG_HZ the
// kernel was built with; sysconf(_SC_CLK_TCK) returns the same constant, so
// it is not worth a syscall.
const userHZ = 100

const tick = time.Second / userHZ

// Thread is the CPU account of one OS thread, from /proc/PID/task/TID/stat.
type Thread struct {
	TID int `json:"tid"`
	// Name is the thread's comm (15 bytes at most, set by prctl PR_SET_NAME;
	// ioruntime names its threads felix-io-N).
	Name string `json:"name"`
	// State is the one-letter scheduler state of proc(5): R, S, D, ...
	State  string        `json:"state"`
	User   time.Duration `json:"user_ns"`
	System time.Duration `json:"system_ns"`
	// Start is when the thread was created, as time since boot. TIDs are
	// reused, so a thread is identified across snapshots by TID and Start.
	Start time.Duration `json:"start_ns"`
}

// ProcessCPU is the CPU account of a whole process, from /proc/PID/stat. It
// includes threads that have already exited.
type ProcessCPU struct {
	PID     int           `json:"pid"`
	Name    string        `json:"name"`
	Threads int           `json:"threads"`
	User    time.Duration `json:"user_ns"`
	System  time.Duration `json:"system_ns"`
}

// CPUTimes is one line of /proc/stat: where CPU time went since boot. User
// and Nice include guest time (proc(5)).
type CPUTimes struct {
	User    time.Duration `json:"user_ns"`
	Nice    time.Duration `json:"nice_ns"`
	System  time.Duration `json:"system_ns"`
	Idle    time.Duration `json:"idle_ns"`
	IOWait  time.Duration `json:"iowait_ns"`
	IRQ     time.Duration `json:"irq_ns"`
	SoftIRQ time.Duration `json:"softirq_ns"`
	Steal   time.Duration `json:"steal_ns"`
}

// CPUStat is the CPUTimes of one CPU (the cpuN lines of /proc/stat).
type CPUStat struct {
	ID int `json:"cpu"`
	CPUTimes
}

// SystemCPU is /proc/stat: the sum over all CPUs and each online CPU.
type SystemCPU struct {
	Total CPUTimes  `json:"total"`
	CPUs  []CPUStat `json:"cpus"`
}

// pidStat holds the fields of /proc/PID/stat (or task/TID/stat) Felix uses.
type pidStat struct {
	id         int
	name       string
	state      string
	numThreads int
	user       time.Duration
	system     time.Duration
	start      time.Duration
}

// Field numbers of proc(5), counted from 1 (pid) and 2 (comm).
const (
	fieldState      = 3
	fieldUtime      = 14
	fieldStime      = 15
	fieldNumThreads = 20
	fieldStarttime  = 22
)

// parseStat parses /proc/PID/stat. The comm field is whatever the program
// named its thread, spaces and parentheses included, so it is taken as
// everything between the first '(' and the last ')': the fields after it
// are numbers and the state letter, which never contain ')'.
func parseStat(b []byte) (pidStat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return pidStat{}, fmt.Errorf("%w: stat: no (comm)", ErrMalformed)
	}
	id, err := strconv.ParseUint(string(bytes.TrimSpace(b[:open])), 10, 31)
	if err != nil {
		return pidStat{}, fmt.Errorf("%w: stat: pid: %w", ErrMalformed, err)
	}
	// rest[0] is field 3 (state).
	rest := bytes.Fields(b[end+1:])
	if len(rest) <= fieldStarttime-fieldState {
		return pidStat{}, fmt.Errorf("%w: stat: %d fields after comm", ErrMalformed, len(rest))
	}
	field := func(n int) []byte { return rest[n-fieldState] }
	s := pidStat{id: int(id), name: string(b[open+1 : end]), state: string(field(fieldState))}
	threads, err := strconv.ParseUint(string(field(fieldNumThreads)), 10, 31)
	if err != nil {
		return pidStat{}, fmt.Errorf("%w: stat: num_threads: %w", ErrMalformed, err)
	}
	s.numThreads = int(threads)
	for _, f := range []struct {
		n   int
		dst *time.Duration
	}{{fieldUtime, &s.user}, {fieldStime, &s.system}, {fieldStarttime, &s.start}} {
		if *f.dst, err = parseTicks(field(f.n)); err != nil {
			return pidStat{}, fmt.Errorf("%w: stat field %d: %w", ErrMalformed, f.n, err)
		}
	}
	return s, nil
}

// maxTicks keeps tick counts convertible to a time.Duration (292 years).
const maxTicks = math.MaxInt64 / int64(tick)

func parseTicks(b []byte) (time.Duration, error) {
	n, err := strconv.ParseUint(string(b), 10, 63)
	if err != nil {
		return 0, err
	}
	if n > uint64(maxTicks) {
		return 0, fmt.Errorf("%d ticks overflow a duration", n)
	}
	return time.Duration(n) * tick, nil
}

func (s pidStat) thread() Thread {
	return Thread{TID: s.id, Name: s.name, State: s.state, User: s.user, System: s.system, Start: s.start}
}

func (s pidStat) process() ProcessCPU {
	return ProcessCPU{PID: s.id, Name: s.name, Threads: s.numThreads, User: s.user, System: s.system}
}

// parseSystemStat parses the cpu lines of /proc/stat. Offline CPUs have no
// line, so each CPU keeps the number from its name. Kernels older than
// 2.6.11 print fewer than eight columns; the missing ones read zero. Columns
// after steal (guest, guest_nice) are already inside user and nice.
func parseSystemStat(b []byte) (SystemCPU, error) {
	var sys SystemCPU
	total := false
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		name, rest, ok := bytes.Cut(line, []byte(" "))
		if !ok || !bytes.HasPrefix(name, []byte("cpu")) {
			continue
		}
		times, err := parseCPULine(rest)
		if err != nil {
			return SystemCPU{}, fmt.Errorf("%w: /proc/stat %s: %w", ErrMalformed, name, err)
		}
		if len(name) == len("cpu") {
			sys.Total, total = times, true
			continue
		}
		id, err := strconv.ParseUint(string(name[len("cpu"):]), 10, 31)
		if err != nil {
			return SystemCPU{}, fmt.Errorf("%w: /proc/stat: cpu name %q", ErrMalformed, name)
		}
		sys.CPUs = append(sys.CPUs, CPUStat{ID: int(id), CPUTimes: times})
	}
	if !total {
		return SystemCPU{}, fmt.Errorf("%w: /proc/stat: no cpu line", ErrMalformed)
	}
	return sys, nil
}

func parseCPULine(b []byte) (CPUTimes, error) {
	var c CPUTimes
	dst := []*time.Duration{&c.User, &c.Nice, &c.System, &c.Idle, &c.IOWait, &c.IRQ, &c.SoftIRQ, &c.Steal}
	fields := bytes.Fields(b)
	if len(fields) < 4 {
		return CPUTimes{}, fmt.Errorf("%d columns, want at least 4", len(fields))
	}
	for i, f := range fields[:min(len(fields), len(dst))] {
		v, err := parseTicks(f)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("column %d: %w", i+1, err)
		}
		*dst[i] = v
	}
	return c, nil
}
