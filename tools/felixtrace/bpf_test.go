package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cpuprofile"
)

// Probes that cannot load (the error wraps cpuprofile.ErrNotSupported, as
// OpenProbes returns it without root) cost one line on stderr; the run goes
// on with the /proc numbers. Probes that fail later stop with one line too.
func TestBPFDegradesWithOneLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		open   func() (probes, error)
		line   string
		bpfRun bool
	}{
		{"not supported", func() (probes, error) {
			return nil, fmt.Errorf("%w: load the softirq probe: operation not permitted (eBPF probes need root, or CAP_BPF and CAP_PERFMON)", cpuprofile.ErrNotSupported)
		}, "felixtrace: eBPF probes unavailable (cpuprofile: not supported: load the softirq probe: operation not permitted (eBPF probes need root, or CAP_BPF and CAP_PERFMON)); using /proc numbers\n", false},
		{"bug", func() (probes, error) { return nil, errors.New("cpuprofile: verifier rejected the program") },
			"felixtrace: eBPF probes failed, which is a bug worth reporting (cpuprofile: verifier rejected the program); using /proc numbers\n", false},
		{"stops mid-run", func() (probes, error) { return &fakeProbes{failAfter: 2}, nil },
			"felixtrace: eBPF probes stopped (cpuprofile: probes closed); using /proc numbers\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(orig func() (probes, error)) { openProbes = orig }(openProbes)
			openProbes = tc.open
			file := filepath.Join(t.TempDir(), "trace.json")
			var stdout, stderr bytes.Buffer
			sum, err := run(context.Background(), Config{Admin: fakeAdmin(t), Interval: 20 * time.Millisecond,
				Duration: 60 * time.Millisecond, BPF: true, JSONFile: file, Top: 3}, &stdout, &stderr)
			require.NoError(t, err)
			require.Equal(t, tc.line, stderr.String())
			require.Equal(t, 3, sum.Samples, "the run goes on")
			start, samples, _ := readJSON(t, file)
			require.Equal(t, tc.bpfRun, start.BPF)
			require.Len(t, samples, 3)
			require.Equal(t, tc.bpfRun, samples[0].BPF != nil)
			require.Nil(t, samples[2].BPF)
		})
	}
}

// fakeProbes count up, then fail as closed Probes do.
type fakeProbes struct {
	reads, failAfter int
}

func (p *fakeProbes) Softirq() ([]cpuprofile.SoftirqCPU, error) {
	if p.reads++; p.reads > p.failAfter {
		return nil, cpuprofile.ErrClosed
	}
	c := cpuprofile.SoftirqCPU{}
	c.Vectors[3] = cpuprofile.SoftirqVector{Name: "net_rx", Time: time.Duration(p.reads) * time.Millisecond, Count: uint64(p.reads)}
	return []cpuprofile.SoftirqCPU{c}, nil
}

func (p *fakeProbes) BlockIO() (cpuprofile.BlockIOHist, error) { return cpuprofile.BlockIOHist{}, nil }
func (p *fakeProbes) Close() error                             { return nil }

func TestBlockQuantile(t *testing.T) {
	var h cpuprofile.BlockIOHist
	h.Slots[7], h.Slots[10], h.Slots[cpuprofile.BlockIOSlots-1] = 98, 1, 1 // [128µs, 256µs), [1ms, 2ms), open-ended
	h.Count = 100
	require.Equal(t, 256*time.Microsecond, blockQuantile(h, 0.5))
	require.Equal(t, 2048*time.Microsecond, blockQuantile(h, 0.99))
	last, _ := cpuprofile.BlockIOSlotRange(cpuprofile.BlockIOSlots - 1)
	require.Equal(t, last, blockQuantile(h, 1))
	require.Zero(t, blockQuantile(cpuprofile.BlockIOHist{}, 0.5))
}
