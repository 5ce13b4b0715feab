package segment

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOffsetForTime: over several segments with a sparse index, the answer
// is the first record appended at or after the time, found through the
// segment's newest timestamp and its index; a time past everything below
// the limit has none, one before everything answers the oldest record.
func TestOffsetForTime(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 1024, IndexSpacingBytes: 96})
	// Batches of 3 records at times 100, 110, 120, ...: offset o was
	// appended at 100 + 10*(o/3).
	for i := range 60 {
		_, err := l.Append([][]byte{payload(i, 20), payload(i+1, 20), payload(i+2, 20)}, int64(100+10*i))
		require.NoError(t, err)
	}
	require.Greater(t, l.Stats().Segments, 4)
	for _, c := range []struct {
		ts    int64
		limit uint64
		want  uint64
		found bool
	}{
		{0, 180, 0, true},
		{100, 180, 0, true},
		{101, 180, 3, true},
		{110, 180, 3, true},
		{355, 180, 78, true},
		{690, 180, 177, true},
		{691, 180, 0, false},
		{355, 50, 0, false},
		{355, 79, 78, true},
	} {
		got, found, err := l.OffsetForTime(c.ts, c.limit)
		require.NoError(t, err)
		require.Equal(t, c.found, found, "ts %d limit %d", c.ts, c.limit)
		if c.found {
			require.Equal(t, c.want, got, "ts %d limit %d", c.ts, c.limit)
		}
	}
	require.NoError(t, l.Close())
	_, _, err := l.OffsetForTime(1, 1)
	require.ErrorIs(t, err, ErrClosed)
}

// TestOffsetForTimePassesGenerationRecords: a replica's generation records
// (timestamp 0) between events, some at index entries, neither answer a
// search nor mislead the search of the index.
func TestOffsetForTimePassesGenerationRecords(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{FormatVersion: FormatVersionV4, IndexSpacingBytes: 1})
	gen := Record{Mark: Mark{Kind: MarkGeneration}, Payload: []byte{0, 0, 0, 0, 0, 0, 0, 1}}
	// Offset 4i is a term start, 4i+1..4i+3 events at 100+10i.
	for i := range 16 {
		ev := Record{TimestampMicros: int64(100 + 10*i), Payload: payload(i, 20)}
		_, err := l.AppendRecords([]Record{gen, ev, ev, ev})
		require.NoError(t, err)
	}
	for i := range 16 {
		for _, d := range []int64{-5, 0} {
			got, found, err := l.OffsetForTime(int64(100+10*i)+d, l.Next())
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, uint64(4*i+1), got, "ts %d", 100+10*i+int(d))
		}
	}
	_, found, err := l.OffsetForTime(251, l.Next())
	require.NoError(t, err)
	require.False(t, found)
}
