package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// exactQuantile is the nearest-rank quantile of sorted values.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[rank-1]
}

var quantiles = []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1}

// requireWithinError checks the documented bound: |got − exact| ≤ exact/256.
func requireWithinError(t *testing.T, h *Histogram, values []int64) {
	t.Helper()
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	for _, q := range quantiles {
		exact := exactQuantile(sorted, q)
		got := h.Quantile(q)
		require.LessOrEqual(t, math.Abs(float64(got-exact)), float64(exact)/256,
			"q=%v: got %d, exact %d", q, got, exact)
	}
	require.Equal(t, sorted[len(sorted)-1], h.Max())
	require.EqualValues(t, len(values), h.Count())
}

func TestHistogramQuantilesWithinRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gens := map[string]func() int64{
		// Log-uniform from 1 ns to 60 s: every bucket scale.
		"log-uniform": func() int64 { return int64(math.Exp(rng.Float64() * math.Log(60e9))) },
		// A latency-like body with a long tail.
		"lognormal": func() int64 { return int64(math.Exp(11 + 1.5*rng.NormFloat64())) },
		// Small integers, where buckets are exact.
		"small": func() int64 { return rng.Int64N(300) },
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{1, 7, 1000, 100000} {
				var h Histogram
				values := make([]int64, n)
				for i := range values {
					values[i] = gen()
					h.Record(values[i])
				}
				requireWithinError(t, &h, values)
			}
		})
	}
}

func TestHistogramBucketsTileTheRange(t *testing.T) {
	// Consecutive buckets are adjacent and each holds exactly its range.
	next := int64(0)
	for i := range numBuckets {
		lo, width := bucketRange(i)
		require.Equal(t, next, lo, "bucket %d", i)
		require.Equal(t, i, bucketIndex(lo))
		require.Equal(t, i, bucketIndex(lo+width-1))
		if lo >= 2*subBuckets {
			require.LessOrEqual(t, width*subBuckets, lo, "bucket %d wider than 1/128 of its start", i)
		}
		next = lo + width
	}
	require.EqualValues(t, int64(maxTrackable)+1, next)
}

func TestHistogramMergeEqualsRecordingEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b, all Histogram
	var values []int64
	for i := range 5000 {
		v := rng.Int64N(int64(10e6))
		values = append(values, v)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	var merged Histogram
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(&Histogram{}) // empty merges are no-ops
	require.Equal(t, all.counts, merged.counts)
	require.Equal(t, all.Count(), merged.Count())
	require.Equal(t, all.Max(), merged.Max())
	require.Equal(t, all.min, merged.min)
	requireWithinError(t, &merged, values)
}

func TestHistogramEdges(t *testing.T) {
	var h Histogram
	require.Zero(t, h.Quantile(0.5))
	require.Nil(t, h.Summary())

	h.Record(-5) // clock skew: counts as 0
	require.Zero(t, h.Quantile(0.5))

	h = Histogram{}
	h.Record(120e9) // beyond the tracked range: top bucket, true max kept
	h.Record(1000)
	s := h.Summary()
	require.EqualValues(t, 1, s.Saturated)
	require.Equal(t, 120e9/1e3, s.Max)
	require.InDelta(t, 1.0, s.P50, 1.0/256)

	h = Histogram{}
	for range 10 {
		h.Record(42_000)
	}
	s = h.Summary()
	// One distinct value: every quantile is exact (clamped to min and max).
	require.Equal(t, []float64{42, 42, 42, 42, 42, 42}, []float64{s.P50, s.P90, s.P99, s.P999, s.Max, s.Mean})
}
