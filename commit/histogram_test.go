package commit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHistogramBucketsArePowersOfTwo pins the bucket layout an exporter
// relies on: bucket 0 is exactly 0, bucket i is [2^(i-1), 2^i).
func TestHistogramBucketsArePowersOfTwo(t *testing.T) {
	var h Histogram
	for _, v := range []uint64{0, 1, 2, 3, 4, 7, 8, 1000, math.MaxUint64} {
		h.Record(v)
	}
	s := h.Snapshot()
	require.Equal(t, uint64(9), s.Count)
	want := map[int]uint64{0: 1, 1: 1, 2: 2, 3: 2, 4: 1, 10: 1, 64: 1}
	for i, n := range s.Buckets {
		require.Equal(t, want[i], n, "bucket %d", i)
	}
	require.Equal(t, uint64(0), BucketUpperBound(0))
	require.Equal(t, uint64(1), BucketUpperBound(1))
	require.Equal(t, uint64(1023), BucketUpperBound(10))
	require.Equal(t, uint64(math.MaxUint64), BucketUpperBound(64))
}

// TestHistogramQuantileIsTheBucketUpperBound proves Quantile's promise: it
// never understates, and overstates by less than 2x.
func TestHistogramQuantileIsTheBucketUpperBound(t *testing.T) {
	var h Histogram
	require.Zero(t, h.Snapshot().Quantile(0.5))
	for v := uint64(1); v <= 100; v++ {
		h.Record(v)
	}
	s := h.Snapshot()
	require.Equal(t, uint64(63), s.Quantile(0.5)) // true p50 is 50
	require.Equal(t, uint64(127), s.Quantile(0.99))
	require.Equal(t, uint64(1), s.Quantile(0))
	require.InDelta(t, 50.5, s.Mean(), 1e-9)

	before := s
	h.Record(5)
	d := h.Snapshot().Sub(before)
	require.Equal(t, uint64(1), d.Count)
	require.Equal(t, uint64(5), d.Sum)
	require.Equal(t, uint64(1), d.Buckets[3])
}

// TestHistogramRecordDoesNotAllocate keeps the flusher's bookkeeping free.
func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	var h Histogram
	require.Zero(t, testing.AllocsPerRun(100, func() { h.Record(12345) }))
}
