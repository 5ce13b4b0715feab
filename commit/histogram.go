package commit

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// HistogramBuckets is the number of buckets of a Histogram: bucket 0 holds
// the value 0 and bucket i (1..64) holds values in [2^(i-1), 2^i).
const HistogramBuckets = 65

// Histogram is a fixed power-of-two bucket histogram of uint64 values. One
// goroutine records (the sequencer's flusher); any goroutine may take a
// Snapshot. Recording is three atomic adds and never allocates. The zero
// value is ready to use.
type Histogram struct {
	buckets [HistogramBuckets]atomic.Uint64
	count   atomic.Uint64
	sum     atomic.Uint64
}

// Record adds one observation.
func (h *Histogram) Record(v uint64) {
	h.buckets[bits.Len64(v)].Add(1)
	h.sum.Add(v)
	h.count.Add(1)
}

// Snapshot copies the histogram. The fields are read one by one, so a
// snapshot taken while an observation is being recorded may count it in
// some fields and not others; Quantile uses the buckets only.
func (h *Histogram) Snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	for i := range h.buckets {
		s.Buckets[i] = h.buckets[i].Load()
	}
	s.Sum = h.sum.Load()
	s.Count = h.count.Load()
	return s
}

// HistogramSnapshot is a copy of a Histogram.
type HistogramSnapshot struct {
	Buckets [HistogramBuckets]uint64 // Buckets[i] counts values v with bits.Len64(v) == i
	Count   uint64
	Sum     uint64
}

// BucketUpperBound is the largest value bucket i holds (inclusive): 0 for
// bucket 0, 2^i - 1 otherwise. An exporter uses it as the bucket's "le".
func BucketUpperBound(i int) uint64 {
	if i >= 64 {
		return math.MaxUint64
	}
	return 1<<i - 1
}

// Mean is Sum/Count, or 0 for an empty histogram.
func (s HistogramSnapshot) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Sum) / float64(s.Count)
}

// Quantile returns an upper bound for the q-quantile (0 < q ≤ 1): the upper
// bound of the bucket that holds it, so at most twice the true value. It
// returns 0 for an empty histogram.
func (s HistogramSnapshot) Quantile(q float64) uint64 {
	var total uint64
	for _, n := range s.Buckets {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	rank = max(rank, 1)
	var seen uint64
	for i, n := range s.Buckets {
		seen += n
		if seen >= rank {
			return BucketUpperBound(i)
		}
	}
	return math.MaxUint64
}

// Sub returns the observations recorded between an earlier snapshot and s.
func (s HistogramSnapshot) Sub(earlier HistogramSnapshot) HistogramSnapshot {
	d := HistogramSnapshot{Count: s.Count - earlier.Count, Sum: s.Sum - earlier.Sum}
	for i := range s.Buckets {
		d.Buckets[i] = s.Buckets[i] - earlier.Buckets[i]
	}
	return d
}
