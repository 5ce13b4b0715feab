package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// record is one line of --json: exactly one field is set.
type record struct {
	Start   *startRecord `json:"start,omitempty"`
	Sample  *Sample      `json:"sample,omitempty"`
	Summary *Summary     `json:"summary,omitempty"`
}

type startRecord struct {
	Tool     string        `json:"tool"`
	Admin    string        `json:"admin"`
	Started  time.Time     `json:"started"`
	Interval time.Duration `json:"interval_ns"`
	Duration time.Duration `json:"duration_ns"`
	// BPF is whether the eBPF probes run; BPFUnavailable says why not
	// when --bpf asked for them.
	BPF            bool   `json:"bpf"`
	BPFUnavailable string `json:"bpf_unavailable,omitempty"`
	CPUUnavailable string `json:"cpu_unavailable,omitempty"`
}

// notes are what the summary repeats of the start: what is not measured.
func (r *startRecord) notes() []string {
	var notes []string
	for _, n := range []struct{ what, why string }{{"eBPF probes unavailable", r.BPFUnavailable}, {"CPU unavailable", r.CPUUnavailable}} {
		if n.why != "" {
			notes = append(notes, n.what+": "+n.why)
		}
	}
	return notes
}

// jsonOut writes --json records, one per line, as they happen, so that a
// killed run leaves every sample so far. A nil jsonOut writes nothing.
type jsonOut struct {
	f   *os.File
	enc *json.Encoder
}

func createJSON(path string) (*jsonOut, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &jsonOut{f: f, enc: json.NewEncoder(f)}, nil
}

func (o *jsonOut) write(r record) error {
	if o == nil {
		return nil
	}
	return o.enc.Encode(r)
}

// close is idempotent.
func (o *jsonOut) close() error {
	if o == nil || o.f == nil {
		return nil
	}
	err := o.f.Close()
	o.f = nil
	return err
}

// run is felixtrace: a baseline scrape, then each interval a scrape, a
// Sample against the previous one, its table on stdout and its record in
// --json, until ctx ends or cfg.Duration's samples are taken; then the
// summary. Problems that do not stop the run (a failed scrape, probes that
// cannot load) are one line on stderr each. It fails only when the broker
// cannot be read at the start or --json cannot be written.
func run(ctx context.Context, cfg Config, stdout, stderr io.Writer) (*Summary, error) {
	sc := newScraper(cfg.Admin, max(cfg.Interval, 2*time.Second))
	prev, err := sc.scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot read the broker's stats (is --admin %s its FELIX_ADMIN_BIND?): %w", cfg.Admin, err)
	}
	out, err := createJSON(cfg.JSONFile)
	if err != nil {
		return nil, fmt.Errorf("--json: %w", err)
	}
	defer out.close()
	start := startRecord{Tool: "felixtrace", Admin: cfg.Admin, Started: time.Now(), Interval: cfg.Interval,
		Duration: cfg.Duration}
	if prev.CPU == nil {
		start.CPUUnavailable = cmp.Or(prev.CPUUnavailable, noCPU)
	}
	var bpf *bpfSampler
	if cfg.BPF {
		bpf, start.BPFUnavailable = startBPF(stderr)
		defer func() { bpf.close() }()
		// Loading the probes takes a while: a fresh baseline keeps the
		// first interval's /proc and probe figures over the same time.
		if p, err := sc.scrape(ctx); err == nil {
			prev = p
		}
	}
	start.BPF = bpf != nil
	if err := out.write(record{Start: &start}); err != nil {
		return nil, fmt.Errorf("--json: %w", err)
	}
	sum := newSummary(start.Started)
	sum.Notes = start.notes()

	ticker := time.NewTicker(cfg.Interval)
	defer ticker.Stop()
	for want := cfg.samples(); want == 0 || sum.Samples < want; {
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
		if ctx.Err() != nil {
			break
		}
		cur, err := sc.scrape(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(stderr, "felixtrace: %v (trying again next interval)\n", err)
			continue
		}
		s := compute(prev, cur)
		prev = cur
		if bpf != nil && !sampleBPF(bpf, &s, stderr) {
			bpf.close()
			bpf = nil
			sum.Notes = append(sum.Notes, "eBPF probes stopped during the run")
		}
		printSample(stdout, &s, cfg.Top)
		if err := out.write(record{Sample: &s}); err != nil {
			return nil, fmt.Errorf("--json: %w", err)
		}
		sum.add(&s)
	}
	sum.finish(time.Now())
	printSummary(stdout, sum, cfg.Top)
	if err := out.write(record{Summary: sum}); err != nil {
		return sum, fmt.Errorf("--json: %w", err)
	}
	if err := out.close(); err != nil {
		return sum, fmt.Errorf("--json: %w", err)
	}
	return sum, nil
}

// sampleBPF adds the probes' interval to s; false (after one line on
// stderr) when they can no longer be read.
func sampleBPF(bpf *bpfSampler, s *Sample, stderr io.Writer) bool {
	cpus := 0
	if s.System != nil {
		cpus = s.System.CPUs
	}
	b, bio, err := bpf.sample(cpus)
	if err != nil {
		fmt.Fprintf(stderr, "felixtrace: eBPF probes stopped (%v); using /proc numbers\n", err)
		return false
	}
	s.BPF, s.blockIO = b, bio
	return true
}
