package cpuprofile

import (
	"slices"
	"time"
)

// Snapshot is one reading of the CPU counters of a process and the system.
// Every counter is cumulative (since boot or since the thread started), so
// a snapshot alone says little; Delta between two says where CPU went.
type Snapshot struct {
	At      time.Time  `json:"at"`
	Process ProcessCPU `json:"process"`
	Threads []Thread   `json:"threads"`
	System  SystemCPU  `json:"system"`
}

// TakeSnapshot reads the counters of process pid (0 for the calling
// process) and of the system.
func TakeSnapshot(pid int) (Snapshot, error) {
	var s Snapshot
	var err error
	s.At = time.Now()
	if s.Process, err = Process(pid); err != nil {
		return Snapshot{}, err
	}
	if s.Threads, err = Threads(pid); err != nil {
		return Snapshot{}, err
	}
	if s.System, err = System(); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// Every rate below is CPU time per wall-clock time over the interval: the
// fraction of one CPU, so 1 is one CPU busy throughout, and a system figure
// can reach the number of CPUs.

// Rates splits the CPU use of a thread or process.
type Rates struct {
	User   float64 `json:"user"`
	System float64 `json:"system"`
}

// ThreadRates is one thread's share of an interval.
type ThreadRates struct {
	TID   int    `json:"tid"`
	Name  string `json:"name"`
	State string `json:"state"`
	Rates
	// New is set when the thread was not in the previous snapshot: all its
	// CPU time since it started is counted in this interval.
	New bool `json:"new,omitempty"`
}

// ExitedThread names a thread of the previous snapshot that is gone. Its
// CPU time between that snapshot and its exit is in the process rates only.
type ExitedThread struct {
	TID  int    `json:"tid"`
	Name string `json:"name"`
}

// CPUSplit is where the CPU time of the system, or of one CPU, went. User
// includes nice and guest time.
type CPUSplit struct {
	User    float64 `json:"user"`
	System  float64 `json:"system"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	IOWait  float64 `json:"iowait"`
	Idle    float64 `json:"idle"`
	Steal   float64 `json:"steal"`
}

// CPURates is the CPUSplit of one CPU.
type CPURates struct {
	ID int `json:"cpu"`
	CPUSplit
}

// Sample is what happened between two snapshots.
type Sample struct {
	Interval time.Duration `json:"interval_ns"`
	Process  Rates         `json:"process"`
	// Threads are in ascending TID order.
	Threads []ThreadRates  `json:"threads"`
	Exited  []ExitedThread `json:"exited_threads,omitempty"`
	System  CPUSplit       `json:"system"`
	CPUs    []CPURates     `json:"cpus"`
}

// threadKey identifies a thread across snapshots: the kernel reuses TIDs.
type threadKey struct {
	tid   int
	start time.Duration
}

// Delta computes the rates between two snapshots of the same process, prev
// taken first; without time between them there are no rates. A counter that
// went backwards counts as zero: /proc/stat's iowait can decrease
// (Documentation/filesystems/proc.rst, "iowait").
func Delta(prev, cur Snapshot) Sample {
	s := Sample{Interval: cur.At.Sub(prev.At)}
	if s.Interval <= 0 {
		return s
	}
	rate := func(from, to time.Duration) float64 {
		return float64(max(to-from, 0)) / float64(s.Interval)
	}
	s.Process = Rates{User: rate(prev.Process.User, cur.Process.User), System: rate(prev.Process.System, cur.Process.System)}
	s.Threads, s.Exited = threadDeltas(prev.Threads, cur.Threads, rate)

	split := func(from, to CPUTimes) CPUSplit {
		return CPUSplit{
			User:    rate(from.User+from.Nice, to.User+to.Nice),
			System:  rate(from.System, to.System),
			IRQ:     rate(from.IRQ, to.IRQ),
			SoftIRQ: rate(from.SoftIRQ, to.SoftIRQ),
			IOWait:  rate(from.IOWait, to.IOWait),
			Idle:    rate(from.Idle, to.Idle),
			Steal:   rate(from.Steal, to.Steal),
		}
	}
	s.System = split(prev.System.Total, cur.System.Total)
	for _, c := range cur.System.CPUs {
		// A CPU that came online during the interval has no baseline.
		i := slices.IndexFunc(prev.System.CPUs, func(p CPUStat) bool { return p.ID == c.ID })
		if i >= 0 {
			s.CPUs = append(s.CPUs, CPURates{ID: c.ID, CPUSplit: split(prev.System.CPUs[i].CPUTimes, c.CPUTimes)})
		}
	}
	return s
}

func threadDeltas(prev, cur []Thread, rate func(from, to time.Duration) float64) ([]ThreadRates, []ExitedThread) {
	before := make(map[threadKey]Thread, len(prev))
	for _, t := range prev {
		before[threadKey{t.TID, t.Start}] = t
	}
	rates := make([]ThreadRates, 0, len(cur))
	for _, t := range cur {
		key := threadKey{t.TID, t.Start}
		p, seen := before[key]
		delete(before, key)
		rates = append(rates, ThreadRates{
			TID: t.TID, Name: t.Name, State: t.State, New: !seen,
			Rates: Rates{User: rate(p.User, t.User), System: rate(p.System, t.System)},
		})
	}
	slices.SortFunc(rates, func(a, b ThreadRates) int { return a.TID - b.TID })
	var exited []ExitedThread
	for _, t := range before {
		exited = append(exited, ExitedThread{TID: t.TID, Name: t.Name})
	}
	slices.SortFunc(exited, func(a, b ExitedThread) int { return a.TID - b.TID })
	return rates, exited
}

// Sampler turns successive snapshots of one process into Samples. It is not
// safe for concurrent use; one goroutine (the stats loop of a broker, the
// ticker of felixtrace) owns it.
type Sampler struct {
	pid  int
	prev Snapshot
}

// NewSampler takes the baseline snapshot of process pid (0 for the calling
// process), so that the first Sample covers the time since NewSampler.
func NewSampler(pid int) (*Sampler, error) {
	prev, err := TakeSnapshot(pid)
	if err != nil {
		return nil, err
	}
	return &Sampler{pid: pid, prev: prev}, nil
}

// Sample takes a snapshot and returns the rates since the previous one.
func (s *Sampler) Sample() (Sample, error) {
	cur, err := TakeSnapshot(s.pid)
	if err != nil {
		return Sample{}, err
	}
	d := Delta(s.prev, cur)
	s.prev = cur
	return d, nil
}
