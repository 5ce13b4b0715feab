package segment

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a log's counters. The broker exports them (to
// Prometheus); this package imports no metrics library.
type Stats struct {
	Appends            uint64 // batches appended
	Records            uint64 // records appended
	Bytes              uint64 // bytes appended, record headers included
	Rolls              uint64
	NoSpace            uint64 // rolls refused for lack of space (ErrNoSpace), each retried
	Syncs              uint64 // Sync calls that wrote something back
	SyncErrors         uint64
	SyncDuration       Histogram
	Segments           int
	RetainedBytes      int64  // bytes of all segments, headers included
	RemovedByRetention uint64 // segments removed by EnforceRetention
	Truncations        uint64 // TruncateFrom calls that cut something
	First, Next        uint64
	Durable            uint64 // every offset below it is durable
	Failed             bool   // the log is in its terminal failed state
	Recovery           RecoveryStats
}

// RecoveryStats describes what Open found and did.
type RecoveryStats struct {
	Segments          int   // segment files opened
	RecordsScanned    int64 // records whose checksums were verified
	BytesScanned      int64
	TruncatedRecords  int64 // torn or repaired records removed from the tail
	TruncatedBytes    int64
	IndexesRebuilt    int // index files that were missing or wrong
	SegmentsDiscarded int // newest segments that were never installed (all zeros)
	// IncompleteBatches counts marked batches that end short of their
	// length before the tail (a log another writer left so; the tail's
	// are cut): kept as they are, noted by felix log verify.
	IncompleteBatches int64
	// FoundBytes is what the segment files Open found hold on disk: the
	// bytes Config.Space was not asked for (a caller accounting disk
	// counts them at Open).
	FoundBytes int64
	Duration   time.Duration
}

// Histogram is a snapshot of a latency histogram with power-of-two
// microsecond buckets: Counts[i] counts durations d with
// d < BucketBound(i) and d >= BucketBound(i-1); the last bucket is open.
type Histogram struct {
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

const histBuckets = 26 // 1 µs .. ~33 s

// BucketBound is the exclusive upper bound of bucket i.
func BucketBound(i int) time.Duration { return time.Microsecond << i }

type histogram struct {
	counts [histBuckets]atomic.Uint64
	count  atomic.Uint64
	sum    atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < histBuckets-1 && d >= BucketBound(i) {
		i++
	}
	h.counts[i].Add(1)
	h.count.Add(1)
	h.sum.Add(int64(d))
}

func (h *histogram) snapshot() Histogram {
	s := Histogram{Counts: make([]uint64, histBuckets), Count: h.count.Load(), Sum: time.Duration(h.sum.Load())}
	for i := range s.Counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// Add is h and o summed (histograms of several logs).
func (h Histogram) Add(o Histogram) Histogram {
	s := Histogram{Counts: make([]uint64, max(len(h.Counts), len(o.Counts))), Count: h.Count + o.Count, Sum: h.Sum + o.Sum}
	for i := range s.Counts {
		if i < len(h.Counts) {
			s.Counts[i] += h.Counts[i]
		}
		if i < len(o.Counts) {
			s.Counts[i] += o.Counts[i]
		}
	}
	return s
}

// Quantile estimates the q-quantile (0..1) as the upper bound of the
// bucket holding it.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q * float64(h.Count))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen > rank {
			return BucketBound(i)
		}
	}
	return BucketBound(len(h.Counts) - 1)
}

type counters struct {
	appends, records, bytes, rolls atomic.Uint64
	syncs, syncErrors, removed     atomic.Uint64
	noSpace, truncations           atomic.Uint64
	syncDur                        histogram
}
