package segment

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMappedSegmentsBounded: a log of many small segments maps at most
// MaxMappedSegments sealed ones (plus the active one) after appends, reads
// across all of them, a time search, a walk of its batches, a reopen and
// retention, and every read returns the right bytes.
func TestMappedSegmentsBounded(t *testing.T) {
	const bound, records = 3, 120
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 2048, MaxMappedSegments: bound}
	l := openLog(t, dir, cfg)
	fillSegments(t, l, records, func(i int) int64 { return int64(i) })
	require.Greater(t, l.Stats().Segments, 30)
	requireMapped := func(l *Log) {
		t.Helper()
		require.LessOrEqual(t, l.MappedSegments(), bound+1)
	}
	requireMapped(l)
	for from := range uint64(records) {
		_, err := l.Read(from, 1, func(off uint64, _ int64, p []byte) bool {
			require.Equal(t, payload(int(off), 500), p)
			return false
		})
		require.NoError(t, err)
		requireMapped(l)
	}
	require.Len(t, readAll(t, l, 0), records)
	requireMapped(l)
	off, ok, err := l.OffsetForTime(7, records)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(7), off)
	requireMapped(l)
	require.NoError(t, l.Batches(0, func(MarkedBatch) bool { return true }))
	requireMapped(l)
	require.NoError(t, l.Close())

	l = openLog(t, dir, cfg)
	requireMapped(l)
	require.Len(t, readAll(t, l, 0), records)
	requireMapped(l)
	l.cfg.RetentionBytes = 10000 // removes unmapped segments and mapped ones
	n, err := l.EnforceRetention(time.Now())
	require.NoError(t, err)
	require.Positive(t, n)
	require.Len(t, readAll(t, l, l.First()), int(l.Next()-l.First()))
	requireMapped(l)
}

// TestMappedSegmentsReadersKeepMappings: readers that hold payloads from
// several segments while other readers cycle through all of them (each
// mapping and evicting) see their bytes unchanged until they close, with an
// appender rolling meanwhile; once they are closed the bound holds again.
func TestMappedSegmentsReadersKeepMappings(t *testing.T) {
	const bound, records = 2, 80
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 2048, MaxMappedSegments: bound})
	fillSegments(t, l, records, func(i int) int64 { return int64(i) })
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 10 {
				from := uint64((g*17 + round*7) % (records - 20))
				r, err := l.NewReader(from)
				if !assertNoError(t, err) {
					return
				}
				var held [][]byte
				for range 20 { // several segments: 3 records of 500 bytes fit one
					rec, err := r.Next()
					if !assertNoError(t, err) {
						return
					}
					held = append(held, rec.Payload)
				}
				for i, p := range held {
					if !bytes.Equal(payload(int(from)+i, 500), p) {
						t.Errorf("reader at %d: record %d changed under it", from, int(from)+i)
					}
				}
				_ = r.Close()
			}
		})
	}
	wg.Go(func() {
		for i := records; i < records+30; i++ {
			if _, err := l.Append([][]byte{payload(i, 500)}, int64(i)); !assertNoError(t, err) {
				return
			}
		}
	})
	wg.Wait()
	require.LessOrEqual(t, l.MappedSegments(), bound+1)
	require.Len(t, readAll(t, l, 0), records+30)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
