package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/felixmq/felix/cpuprofile"
)

// BPFSample is what the eBPF probes saw on this host in one interval.
type BPFSample struct {
	// Softirq is every softirq vector, in vector order (hi, timer, net_tx,
	// net_rx, ...), summed over CPUs.
	Softirq []SoftirqSample `json:"softirq"`
	BlockIO BlockIOSample   `json:"block_io"`
}

// SoftirqSample is one softirq vector: time in it, runs, and that time as %
// of all CPUs.
type SoftirqSample struct {
	Name  string        `json:"name"`
	Time  time.Duration `json:"time_ns"`
	Count uint64        `json:"count"`
	Pct   float64       `json:"pct"`
}

// BlockIOSample is the latency of the block requests completed in the
// interval, issue to completion, on every device. The quantiles are the
// upper bounds of power-of-two microsecond slots.
type BlockIOSample struct {
	Count uint64        `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
}

// probes is what felixtrace reads from cpuprofile.Probes.
type probes interface {
	Softirq() ([]cpuprofile.SoftirqCPU, error)
	BlockIO() (cpuprofile.BlockIOHist, error)
	Close() error
}

// openProbes is cpuprofile.OpenProbes; tests replace it.
var openProbes = func() (probes, error) {
	p, err := cpuprofile.OpenProbes()
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return p, nil
}

// bpfSampler turns successive probe readings into BPFSamples. nil (the
// probes are unavailable) samples nothing.
type bpfSampler struct {
	p    probes
	at   time.Time
	soft []cpuprofile.SoftirqCPU
	bio  cpuprofile.BlockIOHist
}

// startBPF opens the probes and takes the baseline reading. When that is
// impossible it prints one line saying why and returns nil and the reason:
// the run goes on with the /proc numbers.
func startBPF(stderr io.Writer) (*bpfSampler, string) {
	ensureTracefs(stderr)
	p, err := openProbes()
	if err == nil {
		b := &bpfSampler{p: p}
		if err = b.read(); err == nil {
			return b, ""
		}
		p.Close()
	}
	if errors.Is(err, cpuprofile.ErrNotSupported) {
		fmt.Fprintf(stderr, "felixtrace: eBPF probes unavailable (%v); using /proc numbers\n", err)
	} else {
		fmt.Fprintf(stderr, "felixtrace: eBPF probes failed, which is a bug worth reporting (%v); using /proc numbers\n", err)
	}
	return nil, err.Error()
}

// read takes a reading into b.
func (b *bpfSampler) read() error {
	soft, err := b.p.Softirq()
	if err != nil {
		return err
	}
	bio, err := b.p.BlockIO()
	if err != nil {
		return err
	}
	b.at, b.soft, b.bio = time.Now(), soft, bio
	return nil
}

// sample returns what happened since the previous reading; cpus is the
// number of online CPUs, for the softirq shares.
func (b *bpfSampler) sample(cpus int) (*BPFSample, cpuprofile.BlockIOHist, error) {
	at, soft, bio := b.at, b.soft, b.bio
	if err := b.read(); err != nil {
		return nil, cpuprofile.BlockIOHist{}, err
	}
	interval := b.at.Sub(at)
	if cpus <= 0 {
		cpus = len(b.soft)
	}
	s := &BPFSample{Softirq: make([]SoftirqSample, cpuprofile.NumSoftirqs)}
	for v := range s.Softirq {
		s.Softirq[v].Name = cpuprofile.SoftirqName(v)
	}
	for _, c := range cpuprofile.SubSoftirq(b.soft, soft) {
		for v, vec := range c.Vectors {
			s.Softirq[v].Time += vec.Time
			s.Softirq[v].Count += vec.Count
		}
	}
	for v := range s.Softirq {
		if interval > 0 && cpus > 0 {
			s.Softirq[v].Pct = 100 * float64(s.Softirq[v].Time) / float64(interval) / float64(cpus)
		}
	}
	d := b.bio.Sub(bio)
	s.BlockIO = blockIOSample(d)
	return s, d, nil
}

func blockIOSample(h cpuprofile.BlockIOHist) BlockIOSample {
	s := BlockIOSample{Count: h.Count, P50: blockQuantile(h, 0.5), P99: blockQuantile(h, 0.99)}
	if h.Count > 0 {
		s.Mean = h.Total / time.Duration(h.Count)
	}
	return s
}

// blockQuantile is an upper bound of the q-quantile of h: the top of the
// slot that holds it (the bottom for the open-ended last slot).
func blockQuantile(h cpuprofile.BlockIOHist, q float64) time.Duration {
	var total uint64
	for _, n := range h.Slots {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := max(uint64(math.Ceil(q*float64(total))), 1)
	var seen uint64
	for i, n := range h.Slots {
		if seen += n; seen >= rank {
			lo, hi := cpuprofile.BlockIOSlotRange(i)
			if hi == 0 {
				return lo
			}
			return hi
		}
	}
	return 0
}

func (b *bpfSampler) close() {
	if b != nil {
		b.p.Close()
	}
}

func addBlockIO(a, b cpuprofile.BlockIOHist) cpuprofile.BlockIOHist {
	a.Count += b.Count
	a.Total += b.Total
	for i := range a.Slots {
		a.Slots[i] += b.Slots[i]
	}
	return a
}
