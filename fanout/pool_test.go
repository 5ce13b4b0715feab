package fanout

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPoolGetReturnsSoleReferenceWithEmptySliceOfClassCapacity proves Get's
// contract: one reference, len 0, capacity rounded up to the size class,
// zeroed metadata, and direct allocation above the largest class.
func TestPoolGetReturnsSoleReferenceWithEmptySliceOfClassCapacity(t *testing.T) {
	p := newTestPool(t)
	for _, tc := range []struct {
		size, wantCap int
	}{
		{-5, 4 << 10},
		{0, 4 << 10},
		{1, 4 << 10},
		{4 << 10, 4 << 10},
		{4<<10 + 1, 8 << 10},
		{100_000, 128 << 10},
		{16 << 20, 16 << 20},
		{16<<20 + 1, 16<<20 + 1},
	} {
		b := p.Get(tc.size)
		require.Equal(t, 1, b.Refs(), "size %d", tc.size)
		require.Empty(t, b.B, "size %d", tc.size)
		require.Equal(t, tc.wantCap, cap(b.B), "size %d", tc.size)
		require.Zero(t, b.Events)
		require.Zero(t, b.BaseOffset)
		require.Equal(t, int64(tc.wantCap), p.Stats().BytesOutstanding)
		b.Release()
	}
}

// TestBufferLastReleaseRecyclesAndResetsMetadata proves the reference count:
// the buffer stays outstanding until the last of its references is
// released, and a recycled buffer comes back with len 0 and zeroed metadata.
func TestBufferLastReleaseRecyclesAndResetsMetadata(t *testing.T) {
	p := newTestPool(t)
	b := newBuf(p, 3, 100, 42)
	b.Retain()
	b.Retain()
	require.Equal(t, 3, b.Refs())
	b.Release()
	b.Release()
	require.Equal(t, int64(1), p.Stats().BuffersOutstanding)
	b.Release()
	require.Equal(t, int64(0), p.Stats().BuffersOutstanding)

	again := p.Get(100)
	require.Empty(t, again.B)
	require.Zero(t, again.Events)
	require.Zero(t, again.BaseOffset)
	again.Release()
}

// TestPoolReusesReleasedBuffers proves a steady Get/Release cycle recycles
// memory instead of allocating. sync.Pool may drop entries (it drops a
// quarter of them on purpose under -race), so the bound is loose.
func TestPoolReusesReleasedBuffers(t *testing.T) {
	p := newTestPool(t)
	const n = 200
	for range n {
		p.Get(10_000).Release()
	}
	s := p.Stats()
	require.Equal(t, uint64(n), s.Gets)
	require.Less(t, s.Allocs, uint64(n/2), "pool did not recycle")
}

// TestPoolCountersTrackOutstandingBuffersAndBytes proves the counters a soak
// test uses to check that the broker returns to idle.
func TestPoolCountersTrackOutstandingBuffersAndBytes(t *testing.T) {
	p := newTestPool(t)
	a := p.Get(1)
	b := p.Get(5000)
	c := p.Get(MaxPooledSize + 1)
	s := p.Stats()
	require.Equal(t, int64(3), s.BuffersOutstanding)
	require.Equal(t, int64(4<<10+8<<10+MaxPooledSize+1), s.BytesOutstanding)
	a.Release()
	b.Release()
	c.Release()
}

// TestBufferGrownPastClassIsNotRecycled proves that a buffer the broker
// grew by appending past its capacity is dropped rather than pooled, so
// every pooled buffer keeps its class capacity, and the byte counter still
// returns to zero.
func TestBufferGrownPastClassIsNotRecycled(t *testing.T) {
	p := newTestPool(t)
	b := p.Get(1)
	b.B = append(b.B, make([]byte, 5000)...)
	require.Greater(t, cap(b.B), 4<<10)
	b.Release()
	for range 10 {
		again := p.Get(1)
		require.Equal(t, 4<<10, cap(again.B))
		again.Release()
	}
}

// TestReleaseAllReleasesEachAndClearsSlots proves the batch helper returns
// every reference and leaves no stale pointer in the reused slice.
func TestReleaseAllReleasesEachAndClearsSlots(t *testing.T) {
	p := newTestPool(t)
	batch := []*Buffer{p.Get(1), p.Get(1), p.Get(1)}
	full := batch[:3]
	batch = ReleaseAll(batch)
	require.Empty(t, batch)
	for _, b := range full {
		require.Nil(t, b)
	}
}

func BenchmarkPoolGetRelease(b *testing.B) {
	p := &Pool{}
	b.ReportAllocs()
	for b.Loop() {
		p.Get(4096).Release()
	}
}
