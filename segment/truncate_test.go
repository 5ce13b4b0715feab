package segment

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// records are n unmarked records with payloads tagged by gen, so that a
// record written after a truncation differs from the one it replaced.
func records(gen string, from, n int) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{TimestampMicros: int64(from + i), Payload: fmt.Appendf(nil, "%s-%d", gen, from+i)}
	}
	return out
}

func requirePayloads(t *testing.T, l *Log, want map[uint64]string, next uint64) {
	t.Helper()
	got := readAll(t, l, l.First())
	require.Len(t, got, int(next-l.First()))
	for _, r := range got {
		require.Equal(t, want[r.Offset], string(r.Payload), "offset %d", r.Offset)
	}
	require.Equal(t, next, l.Next())
}

// TruncateFrom cuts at any offset: inside the active segment, inside a
// sealed one (the segments after it go), at a segment's base (that
// segment goes too). The log takes appends at the cut, and a reopened log
// holds exactly what was kept and written after: nothing cut comes back.
func TestTruncateFromAnywhereIsDurable(t *testing.T) {
	for _, mode := range []WriteMode{WriteModeFD, WriteModeMapped} {
		// mapped=1: the sealed segments the cut reaches are unmapped
		// (MaxMappedSegments) and mapped again for it.
		for _, mapped := range []int{0, 1} {
			for _, cut := range []uint64{95, 60, 40, 32, 0} {
				t.Run(fmt.Sprintf("%v/mapped=%d/cut=%d", mode, mapped, cut), func(t *testing.T) {
					dir := t.TempDir()
					// 20 records of ~35 bytes per 1 KiB segment (bases 0, 20,
					// ..., 80): 95 cuts the active segment, 32 a sealed one,
					// 40 and 60 at a base (that segment goes), 0 everything.
					cfg := Config{SegmentBytes: 1 << 10, IndexSpacingBytes: 128, WriteMode: mode, MaxMappedSegments: mapped}
					l := openLog(t, dir, cfg)
					want := map[uint64]string{}
					for i := 0; i < 100; i += 10 {
						_, err := l.AppendRecords(records("old", i, 10))
						require.NoError(t, err)
						for j := i; j < i+10; j++ {
							want[uint64(j)] = fmt.Sprintf("old-%d", j)
						}
					}
					require.NoError(t, l.Sync())
					require.Greater(t, l.Stats().Segments, 3)

					require.NoError(t, l.TruncateFrom(cut))
					require.Equal(t, cut, l.Next())
					require.Equal(t, cut, l.Durable())
					for j := cut; j < 100; j++ {
						delete(want, j)
					}
					requirePayloads(t, l, want, cut)
					first, err := l.AppendRecords(records("new", int(cut), 20))
					require.NoError(t, err)
					require.Equal(t, cut, first)
					for j := cut; j < cut+20; j++ {
						want[j] = fmt.Sprintf("new-%d", j)
					}
					require.NoError(t, l.Sync())
					requirePayloads(t, l, want, cut+20)
					require.NoError(t, l.Close())

					l2 := openLog(t, dir, cfg)
					requirePayloads(t, l2, want, cut+20)
					require.EqualValues(t, 1, l.Stats().Truncations)
				})
			}
		}
	}
}

// A truncation at Next does nothing; outside [First, Next] it is refused.
func TestTruncateFromBounds(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{})
	_, err := l.AppendRecords(records("a", 0, 5))
	require.NoError(t, err)
	require.NoError(t, l.TruncateFrom(5))
	require.ErrorIs(t, l.TruncateFrom(6), ErrInvalidRecord)
	require.Zero(t, l.Stats().Truncations)
}

// A v4 log holds generation records beside events, read back as written;
// a v3 log refuses them.
func TestGenerationRecordsNeedV4(t *testing.T) {
	recs := []Record{
		{TimestampMicros: 1, Mark: Mark{Kind: MarkGeneration}, Payload: []byte{0, 0, 0, 0, 0, 0, 0, 7}},
		{TimestampMicros: 2, Payload: []byte("event")},
	}
	v3 := openLog(t, t.TempDir(), Config{})
	_, err := v3.AppendRecords(recs)
	require.ErrorIs(t, err, ErrInvalidRecord)

	dir := t.TempDir()
	v4 := openLog(t, dir, Config{FormatVersion: FormatVersionV4})
	_, err = v4.AppendRecords(recs)
	require.NoError(t, err)
	require.NoError(t, v4.Close())
	got := readAll(t, openLog(t, dir, Config{FormatVersion: FormatVersionV4}), 0)
	require.Len(t, got, 2)
	require.Equal(t, Mark{Kind: MarkGeneration}, got[0].Mark)
	require.Equal(t, []byte("event"), got[1].Payload)
	require.True(t, got[1].Mark.IsEvent())
}

// Recovery drops a marked batch the tail cuts short, unless the log is a
// replica's, which receives a batch in several appends.
func TestPartialBatchAtTheTail(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{KeepPartialBatches: keep}
			l := openLog(t, dir, cfg)
			_, err := l.AppendRecords(records("plain", 0, 3))
			require.NoError(t, err)
			part := records("batch", 3, 4)
			part[0].Mark = Mark{Kind: MarkOpens, ProducerID: 1, Len: 10}
			for i := 1; i < len(part); i++ {
				part[i].Mark = Mark{Kind: MarkContinues}
			}
			_, err = l.AppendRecords(part)
			require.NoError(t, err)
			require.NoError(t, l.Sync())
			require.NoError(t, l.Close())
			want := uint64(3)
			if keep {
				want = 7
			}
			require.Equal(t, want, openLog(t, dir, cfg).Next())
		})
	}
}

// Reset empties the log, which then starts at the base given, durably.
func TestResetStartsOverAtABase(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 1 << 10}
	l := openLog(t, dir, cfg)
	_, err := l.AppendRecords(records("old", 0, 60))
	require.NoError(t, err)
	require.NoError(t, l.Reset(1000))
	require.Equal(t, []uint64{1000, 1000, 1000}, []uint64{l.First(), l.Next(), l.Durable()})
	_, err = l.AppendRecords(records("new", 1000, 3))
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, cfg)
	require.Equal(t, uint64(1000), l2.First())
	requirePayloads(t, l2, map[uint64]string{1000: "new-1000", 1001: "new-1001", 1002: "new-1002"}, 1003)
}

// Retention stops below the floor a replica sets.
func TestRetentionFloor(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 1 << 10, RetentionBytes: 1})
	for i := 0; i < 200; i += 10 {
		_, err := l.AppendRecords(records("r", i, 10))
		require.NoError(t, err)
	}
	l.SetRetentionFloor(150)
	_, err := l.EnforceRetention(time.Now())
	require.NoError(t, err)
	require.LessOrEqual(t, l.First(), uint64(150))
	require.Greater(t, l.First(), uint64(0))
}

// A batch larger than a segment arriving at an empty segment enlarges it
// in place: a new segment would have had its base and file name.
func TestBatchLargerThanAnEmptySegment(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 1 << 10}
	l := openLog(t, dir, cfg)
	big := records("big", 0, 60) // ~2.3 KiB
	_, err := l.AppendRecords(big)
	require.NoError(t, err)
	_, err = l.AppendRecords(records("after", 60, 3))
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.Len(t, segFiles(t, dir, "log"), 2)
	require.Equal(t, 2, l.Stats().Segments, "one segment per file")
	require.NoError(t, l.Close())
	got := readAll(t, openLog(t, dir, cfg), 0)
	require.Len(t, got, 63)
	require.Equal(t, "big-0", string(got[0].Payload))
	require.Equal(t, "after-62", string(got[62].Payload))
}
