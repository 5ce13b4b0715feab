package segment

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func fillSegments(t *testing.T, l *Log, n int, ts func(i int) int64) {
	t.Helper()
	for i := range n {
		_, err := l.Append([][]byte{payload(i, 500)}, ts(i))
		require.NoError(t, err)
	}
}

// TestRetentionByBytes removes sealed head segments until the log fits,
// never the active one, and First rises to the new head.
func TestRetentionByBytes(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Config{SegmentBytes: 2048, RetentionBytes: 5000})
	fillSegments(t, l, 40, func(int) int64 { return 1 })
	before := l.Stats()
	require.Greater(t, before.RetainedBytes, int64(5000))
	n, err := l.EnforceRetention(time.Now())
	require.NoError(t, err)
	require.Positive(t, n)
	after := l.Stats()
	require.LessOrEqual(t, after.RetainedBytes, int64(5000))
	require.Equal(t, before.Segments-n, after.Segments)
	require.Equal(t, uint64(n), after.RemovedByRetention)
	require.Greater(t, l.First(), uint64(0))
	require.Len(t, segFiles(t, dir, "log"), after.Segments)
	require.Len(t, segFiles(t, dir, "index"), after.Segments-1)

	_, err = l.Read(0, 100, func(uint64, int64, []byte) bool { return true })
	var te *TrimmedError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, ErrTrimmed)
	require.Equal(t, l.First(), te.Oldest)
	got := readAll(t, l, l.First())
	require.Len(t, got, int(l.Next()-l.First()))

	// Even a budget of one byte keeps the active segment.
	l.cfg.RetentionBytes = 1
	_, err = l.EnforceRetention(time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, l.Stats().Segments)

	// First survives a reopen.
	first := l.First()
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, Config{SegmentBytes: 2048})
	require.Equal(t, first, l2.First())
}

// TestRetentionByAge removes segments whose newest record is older than
// the cutoff, stopping at the first young one, never the active one.
func TestRetentionByAge(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 2048, RetentionAge: time.Hour})
	old := now.Add(-2 * time.Hour).UnixMicro()
	fillSegments(t, l, 12, func(int) int64 { return old })
	firstYoung := l.Next()
	fillSegments(t, l, 12, func(int) int64 { return now.UnixMicro() })
	n, err := l.EnforceRetention(now)
	require.NoError(t, err)
	require.Positive(t, n)
	// The segment holding the first young record may also hold old ones;
	// it is kept because its newest record is young.
	require.LessOrEqual(t, l.First(), firstYoung)
	require.Greater(t, l.First(), uint64(0))
	n, err = l.EnforceRetention(now)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more is old")

	// Everything old, far in the future: only the active segment stays.
	_, err = l.EnforceRetention(now.Add(100 * time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, l.Stats().Segments)
	require.Equal(t, l.mu.segs[0].base, l.First())
}

func TestRetentionOffIsNoop(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 2048})
	fillSegments(t, l, 20, func(int) int64 { return 0 })
	n, err := l.EnforceRetention(time.Now().Add(1000 * time.Hour))
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestHeldReaderSurvivesRetentionAndClose: a reader's payload slices stay
// valid while retention removes its segment and the log closes; the
// mapping goes when the reader closes.
func TestHeldReaderSurvivesRetentionAndClose(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Config{SegmentBytes: 2048, RetentionBytes: 1})
	require.NoError(t, err)
	fillSegments(t, l, 20, func(int) int64 { return 0 })
	r, err := l.NewReader(0)
	require.NoError(t, err)
	var held [][]byte
	for range 2 { // three records fit a segment: stay inside the first
		rec, err := r.Next()
		require.NoError(t, err)
		held = append(held, rec.Payload)
	}
	head := r.held[0]
	_, err = l.EnforceRetention(time.Now())
	require.NoError(t, err)
	require.Positive(t, l.First())
	_, err = os.Stat(head.path)
	require.True(t, errors.Is(err, os.ErrNotExist), "file unlinked while held")
	require.NoError(t, l.Close())
	for i, p := range held {
		require.Equal(t, payload(i, 500), p, "slice still valid")
	}
	// The reader can even keep reading the segment it holds.
	rec, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, uint64(2), rec.Offset)
	require.Equal(t, int32(1), head.refs.Load())
	require.NoError(t, r.Close())
	require.Equal(t, int32(0), head.refs.Load())
	require.Nil(t, head.data, "unmapped on the last release")
}

// TestRetentionByAgeIgnoresGenerationRecords: a replica's generation
// records carry no time (timestamp 0), so a segment is as old as its
// newest event, or its creation when it holds none, before and after a
// reopen. Judged by its last record, a fresh segment that ends with a term
// start was removed at once.
func TestRetentionByAgeIgnoresGenerationRecords(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := now
	// An index entry at every record: a reopen scans only from the last one,
	// a term start.
	cfg := Config{SegmentBytes: 2048, IndexSpacingBytes: 1, RetentionAge: time.Hour, FormatVersion: FormatVersionV4, Now: func() time.Time { return clock }}
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	gen := Record{Mark: Mark{Kind: MarkGeneration}, Payload: []byte{0, 0, 0, 0, 0, 0, 0, 2}}
	event := Record{TimestampMicros: now.Add(-time.Minute).UnixMicro(), Payload: payload(0, 500)}
	_, err := l.AppendRecords([]Record{gen, event, event, gen})
	require.NoError(t, err)
	// The next batch does not fit: the segment ending with a term start is
	// sealed.
	_, err = l.AppendRecords([]Record{event, event, event})
	require.NoError(t, err)
	require.Equal(t, 2, l.Stats().Segments)

	n, err := l.EnforceRetention(now)
	require.NoError(t, err)
	require.Zero(t, n, "the sealed segment's newest event is a minute old")
	require.NoError(t, l.Close())

	l = openLog(t, dir, cfg)
	n, err = l.EnforceRetention(now)
	require.NoError(t, err)
	require.Zero(t, n, "after a reopen too")
	n, err = l.EnforceRetention(now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n, "an hour after its newest event it goes")

	// A segment of generation records only is as old as its creation.
	big := Record{TimestampMicros: now.UnixMicro(), Payload: payload(1, 1900)}
	_, err = l.AppendRecords([]Record{big}) // rolls: the events' segment is sealed
	require.NoError(t, err)
	clock = now.Add(30 * time.Minute)
	_, err = l.AppendRecords([]Record{gen, gen, gen}) // rolls past big
	require.NoError(t, err)
	_, err = l.AppendRecords([]Record{big}) // rolls: the generation records' segment is sealed
	require.NoError(t, err)
	require.Equal(t, 4, l.Stats().Segments)
	n, err = l.EnforceRetention(clock.Add(time.Hour - time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, n, "the events' segment and big's are over an hour old, the generation records' is not")
	n, err = l.EnforceRetention(clock.Add(time.Hour + time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
}
