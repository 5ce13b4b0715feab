package main

import (
	"math"
	"math/bits"
)

// Histogram is an HDR-style log-linear histogram of non-negative durations
// in nanoseconds, from 0 to maxTrackable (~68.7 s).
//
// Values below 2·subBuckets (256 ns) have a bucket each. Above that, every
// power of two [2^k, 2^(k+1)) is cut into subBuckets (128) equal buckets, so a
// bucket is at most 1/128 of its lower bound wide. A quantile reports the
// midpoint of the bucket holding the nearest-rank sample, clamped to the
// recorded min and max: its relative error against the exact nearest-rank
// value is at most 1/256 (0.39 %), i.e. better than two significant digits.
// Values above maxTrackable land in the top bucket and are counted as
// Saturated (Max still reports the true maximum).
//
// Histograms merge by adding counts, so each goroutine keeps its own and the
// report merges them. The zero value is empty and ready to use; a Histogram
// is not safe for concurrent use.
type Histogram struct {
	counts    []uint64 // allocated on the first Record
	total     uint64
	min, max  int64
	sum       float64
	saturated uint64
}

const (
	subBucketBits = 7
	subBuckets    = 1 << subBucketBits // buckets per power of two
	// maxTrackable is the largest value with its own bucket: 2^36-1 ns.
	maxTrackable = 1<<36 - 1
	numBuckets   = (36-subBucketBits-1)*subBuckets + 2*subBuckets
)

// bucketIndex maps v (0 ≤ v ≤ maxTrackable) to its bucket.
func bucketIndex(v int64) int {
	shift := max(bits.Len64(uint64(v))-(subBucketBits+1), 0)
	return shift*subBuckets + int(v>>shift)
}

// bucketRange returns the lowest value of bucket i and its width.
func bucketRange(i int) (lo, width int64) {
	if i < 2*subBuckets {
		return int64(i), 1
	}
	shift := i/subBuckets - 1
	return int64(i-shift*subBuckets) << shift, int64(1) << shift
}

// Record adds one value; negative values count as 0.
func (h *Histogram) Record(v int64) {
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	v = max(v, 0)
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if h.total == 0 || v > h.max {
		h.max = v
	}
	h.total++
	h.sum += float64(v)
	if v > maxTrackable {
		h.saturated++
		v = maxTrackable
	}
	h.counts[bucketIndex(v)]++
}

// Merge adds every value recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.total == 0 || o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
	h.saturated += o.saturated
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// Max is the largest recorded value (exact), 0 when empty.
func (h *Histogram) Max() int64 { return h.max }

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1): the value of the
// ceil(q·n)-th smallest sample, within the relative error documented on
// Histogram. It returns 0 when the histogram is empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, width := bucketRange(i)
			return min(max(lo+width/2, h.min), h.max)
		}
	}
	return h.max
}

// LatencySummary is a histogram's percentiles in microseconds.
type LatencySummary struct {
	Count     uint64  `json:"count"`
	P50       float64 `json:"p50_us"`
	P90       float64 `json:"p90_us"`
	P99       float64 `json:"p99_us"`
	P999      float64 `json:"p999_us"`
	Max       float64 `json:"max_us"`
	Mean      float64 `json:"mean_us"`
	Saturated uint64  `json:"saturated,omitempty"`
}

// Summary returns the percentiles, or nil when nothing was recorded.
func (h *Histogram) Summary() *LatencySummary {
	if h.total == 0 {
		return nil
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return &LatencySummary{
		Count: h.total,
		P50:   us(h.Quantile(0.50)), P90: us(h.Quantile(0.90)),
		P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)),
		Max: us(h.max), Mean: h.sum / float64(h.total) / 1e3, Saturated: h.saturated,
	}
}
