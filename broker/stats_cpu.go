package broker

import (
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/cpuprofile"
)

// This file holds the parts of /debug/felix/stats that come from the
// accounting of lower packages: the process's CPU (cpuprofile) and each
// durable shard's group commit (commit).
//
// Every number is cumulative, and the server keeps no per-scraper state: a
// client such as felixtrace computes rates from two scrapes (for the CPU,
// cpuprofile.Delta of the two snapshots), so any number of scrapers can
// poll at their own intervals without disturbing each other.

// cpuStats reads the CPU account of this process (per OS thread, exited
// threads in the process totals) and of the machine (/proc/stat). It is
// optional instrumentation (docs/design.md, "Packages": cpuprofile must
// not be required to run the broker): on failure, non-Linux systems included, it
// returns no snapshot and the reason, and Stats carries the reason instead.
func cpuStats() (*cpuprofile.Snapshot, string) {
	s, err := cpuprofile.TakeSnapshot(0)
	if err != nil {
		return nil, err.Error()
	}
	return &s, ""
}

// CommitStats is the group-commit account of one durable shard
// (commit.Stats with JSON names). All counters are cumulative since the
// shard was opened.
type CommitStats struct {
	// Syncs and SyncErrors count Sync calls that succeeded and failed (a
	// failure is terminal for the shard's log).
	Syncs      uint64 `json:"syncs"`
	SyncErrors uint64 `json:"sync_errors"`
	// Reservations counts completed publish batches and Records the records
	// they covered; Failed the reservations completed with an error.
	Reservations uint64 `json:"reservations"`
	Records      uint64 `json:"records"`
	Failed       uint64 `json:"failed"`
	// WaitersPerSync is, per successful sync, the publish batches it
	// released: how well group commit batches. Always 0 in the periodic and
	// never modes, whose publishes do not wait for a sync.
	WaitersPerSync HistogramStats `json:"waiters_per_sync"`
	// RecordsPerSync is, per successful sync, the records it covered.
	RecordsPerSync HistogramStats `json:"records_per_sync"`
	// SyncLatency is the duration of each sync, in nanoseconds.
	SyncLatency HistogramStats `json:"sync_latency_ns"`
}

// HistogramStats is a commit.Histogram in JSON: count, sum, mean and two
// quantiles for reading, and the power-of-two buckets for a client that
// wants the quantiles of an interval (convert two readings with Snapshot,
// then commit.HistogramSnapshot.Sub).
type HistogramStats struct {
	Count uint64  `json:"count"`
	Sum   uint64  `json:"sum"`
	Mean  float64 `json:"mean"`
	// P50 and P99 are upper bounds (the bucket's top, at most twice the
	// true value), as commit.HistogramSnapshot.Quantile returns them.
	P50 uint64 `json:"p50"`
	P99 uint64 `json:"p99"`
	// Buckets[i] counts the values v with bits.Len64(v) == i: bucket 0
	// holds 0, bucket i holds [2^(i-1), 2^i). Trailing empty buckets are
	// left out.
	Buckets []uint64 `json:"buckets"`
}

func histogramStats(h commit.HistogramSnapshot) HistogramStats {
	n := len(h.Buckets)
	for n > 0 && h.Buckets[n-1] == 0 {
		n--
	}
	return HistogramStats{
		Count: h.Count, Sum: h.Sum, Mean: h.Mean(),
		P50: h.Quantile(0.5), P99: h.Quantile(0.99),
		Buckets: append([]uint64{}, h.Buckets[:n]...),
	}
}

// Snapshot converts h back into the commit package's form. Buckets beyond
// commit.HistogramBuckets (from a newer broker) are folded into the last.
func (h HistogramStats) Snapshot() commit.HistogramSnapshot {
	s := commit.HistogramSnapshot{Count: h.Count, Sum: h.Sum}
	for i, n := range h.Buckets {
		s.Buckets[min(i, commit.HistogramBuckets-1)] += n
	}
	return s
}

func commitStats(s commit.Stats) *CommitStats {
	return &CommitStats{
		Syncs: s.Syncs, SyncErrors: s.SyncErrors,
		Reservations: s.Reservations, Records: s.Records, Failed: s.Failed,
		WaitersPerSync: histogramStats(s.WaitersPerSync),
		RecordsPerSync: histogramStats(s.RecordsPerSync),
		SyncLatency:    histogramStats(s.SyncLatency),
	}
}
