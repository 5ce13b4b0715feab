//go:build linux && (amd64 || arm64)

package cpuprofile

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Probes are the loaded and attached eBPF programs: softirq time per CPU and
// vector (tracepoints irq:softirq_entry/exit), block request latency
// (block:block_rq_issue/complete). Their counters run from OpenProbes on.
// Reads are safe for concurrent use and with Close.
type Probes struct {
	softirq softirqObjects
	blockio blockioObjects
	mu      struct {
		sync.Mutex
		links  []link.Link
		closed bool
	}
}

// OpenProbes loads the probes and attaches them to their tracepoints. It
// needs root (or CAP_BPF and CAP_PERFMON) and a mounted tracefs; without
// them, or on a kernel that cannot run the programs, the error wraps
// ErrNotSupported and says why, and the caller keeps to /proc. Any other
// error is a bug in the probes.
func OpenProbes() (*Probes, error) {
	// Needed before 5.11, where BPF memory counts against RLIMIT_MEMLOCK
	// rather than the memory cgroup. Its error is dropped on purpose: an
	// unprivileged caller fails here even on new kernels (rlimit's feature
	// probe cannot create a map either), and the load below then fails with
	// the real cause, to which cilium/ebpf adds a MEMLOCK hint when the limit
	// is the problem.
	_ = rlimit.RemoveMemlock()
	p := &Probes{}
	if err := loadSoftirqObjects(&p.softirq, nil); err != nil {
		return nil, classify("load the softirq probe", err)
	}
	if err := loadBlockioObjects(&p.blockio, nil); err != nil {
		p.softirq.Close()
		return nil, classify("load the block I/O probe", err)
	}
	for _, tp := range []struct {
		group, name string
		prog        *ebpf.Program
	}{
		{"irq", "softirq_entry", p.softirq.SoftirqEntry},
		{"irq", "softirq_exit", p.softirq.SoftirqExit},
		{"block", "block_rq_issue", p.blockio.BlockRqIssue},
		{"block", "block_rq_complete", p.blockio.BlockRqComplete},
	} {
		l, err := link.Tracepoint(tp.group, tp.name, tp.prog, nil)
		if err != nil {
			p.Close()
			// Every failure here is the environment's: tracefs not mounted
			// (an error cilium/ebpf does not classify), the tracepoint
			// missing from this kernel, or perf_event_open refused.
			return nil, fmt.Errorf("%w: attach tracepoint %s:%s (is tracefs mounted at /sys/kernel/tracing?): %w",
				ErrNotSupported, tp.group, tp.name, err)
		}
		p.mu.links = append(p.mu.links, l)
	}
	return p, nil
}

// classify wraps err into ErrNotSupported when it says the environment
// cannot load BPF, rather than that the programs are wrong. A verifier
// rejection comes back as EACCES too, so it is told apart first: it is a bug
// in bpf/*.bpf.c (or a kernel far older than the tracepoints need).
func classify(what string, err error) error {
	var verr *ebpf.VerifierError
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("cpuprofile: %s: verifier rejected the program: %w", what, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %s: %w (eBPF probes need root, or CAP_BPF and CAP_PERFMON)", ErrNotSupported, what, err)
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %w", ErrNotSupported, what, err)
	}
	return fmt.Errorf("cpuprofile: %s: %w", what, err)
}

// Softirq returns, for every possible CPU, the time spent in each softirq
// vector and the number of runs since OpenProbes. A run still in progress
// when the probes were attached is not counted.
func (p *Probes) Softirq() ([]SoftirqCPU, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, ErrClosed
	}
	var cpus []SoftirqCPU
	var perCPU []softirqSoftirqStat
	for vec := range uint32(NumSoftirqs) {
		if err := p.softirq.SoftirqStats.Lookup(vec, &perCPU); err != nil {
			return nil, fmt.Errorf("cpuprofile: read softirq vector %d: %w", vec, err)
		}
		if cpus == nil {
			cpus = make([]SoftirqCPU, len(perCPU))
		}
		for cpu, v := range perCPU[:len(cpus)] {
			cpus[cpu].CPU = cpu
			cpus[cpu].Vectors[vec] = SoftirqVector{Name: softirqNames[vec], Time: time.Duration(v.TimeNs), Count: v.Count}
		}
	}
	return cpus, nil
}

// BlockIO returns the latency histogram of the block requests completed
// since OpenProbes, summed over CPUs and devices.
func (p *Probes) BlockIO() (BlockIOHist, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return BlockIOHist{}, ErrClosed
	}
	var perCPU []blockioBlockioHist
	if err := p.blockio.BlockioHists.Lookup(uint32(0), &perCPU); err != nil {
		return BlockIOHist{}, fmt.Errorf("cpuprofile: read block I/O histogram: %w", err)
	}
	var h BlockIOHist
	for _, v := range perCPU {
		h.Count += v.Count
		h.Total += time.Duration(v.TotalNs)
		for i, n := range v.Slots {
			h.Slots[i] += n
		}
	}
	return h, nil
}

// Close detaches and unloads the probes. It is idempotent.
func (p *Probes) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil
	}
	p.mu.closed = true
	var errs []error
	for _, l := range p.mu.links {
		errs = append(errs, l.Close())
	}
	p.mu.links = nil
	errs = append(errs, p.softirq.Close(), p.blockio.Close())
	return errors.Join(errs...)
}
