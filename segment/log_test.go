package segment

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendReadRoundTripAcrossRolls appends batches of varied sizes over
// many small segments, in both write modes, and reads everything back, also
// after a reopen.
func TestAppendReadRoundTripAcrossRolls(t *testing.T) {
	for _, fd := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "fd"}[fd], func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{SegmentBytes: 2048, IndexSpacingBytes: 256, BaseOffset: 100, WriteMode: writeMode(fd)}
			l := openLog(t, dir, cfg)
			var want []Record
			for i := range 60 {
				batch := make([][]byte, 1+i%5)
				for j := range batch {
					batch[j] = payload(i*7+j, (i*37+j*11)%300)
				}
				first, err := l.Append(batch, int64(1000+i))
				require.NoError(t, err)
				require.Equal(t, uint64(100+len(want)), first)
				for j, p := range batch {
					want = append(want, Record{Offset: first + uint64(j), TimestampMicros: int64(1000 + i), Payload: p})
				}
			}
			require.NoError(t, l.Sync())
			require.Equal(t, uint64(100+len(want)), l.Next())
			require.Equal(t, uint64(100), l.First())
			require.Equal(t, l.Next(), l.Durable())
			require.Greater(t, l.Stats().Rolls, uint64(5))
			require.Equal(t, want, readAll(t, l, 100))
			require.Equal(t, want[37:], readAll(t, l, 137))
			require.Empty(t, readAll(t, l, l.Next()))
			require.Empty(t, readAll(t, l, l.Next()+5))
			require.NoError(t, l.Close())

			l2 := openLog(t, dir, cfg)
			require.Equal(t, want, readAll(t, l2, 100))
			st := l2.Stats().Recovery
			require.Zero(t, st.TruncatedBytes)
			require.Zero(t, st.IndexesRebuilt)
		})
	}
}

// TestBatchNeverSpansSegments: every batch lands in one segment, and a
// batch larger than a segment gets a segment of its own, sized to fit.
func TestBatchNeverSpansSegments(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Config{SegmentBytes: 1024})
	batches := [][]int{{100, 100, 100}, {300, 300}, {2000, 10}, {50}, {900}, {5}}
	var firsts []uint64
	for _, sizes := range batches {
		var b [][]byte
		for i, n := range sizes {
			b = append(b, payload(i, n))
		}
		first, err := l.Append(b, 1)
		require.NoError(t, err)
		firsts = append(firsts, first)
	}
	l.mu.Lock()
	segs := append([]*segment(nil), l.mu.segs...)
	l.mu.Unlock()
	// Each batch's offsets fall in exactly one segment.
	for i, first := range firsts {
		last := first + uint64(len(batches[i])) - 1
		var in []uint64
		for _, s := range segs {
			if first >= s.base && first < s.next {
				in = append(in, s.base)
				require.LessOrEqual(t, last, s.next-1, "batch %d spans segment %d", i, s.base)
			}
		}
		require.Len(t, in, 1)
	}
	// The oversized batch (2010 bytes of payload) got a file sized to fit.
	for _, s := range segs {
		if s.base == firsts[2] {
			fi, err := os.Stat(s.path)
			require.NoError(t, err)
			require.EqualValues(t, SegmentHeaderBytes+2*RecordHeaderBytes+2010, fi.Size())
		}
	}
}

// TestSealedSegmentFileLengthIsContents: a roll trims the preallocated tail.
func TestSealedSegmentFileLengthIsContents(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Config{SegmentBytes: 4096})
	for i := range 40 {
		_, err := l.Append([][]byte{payload(i, 200)}, 1)
		require.NoError(t, err)
	}
	l.mu.Lock()
	segs := append([]*segment(nil), l.mu.segs...)
	l.mu.Unlock()
	require.Greater(t, len(segs), 1)
	for _, s := range segs[:len(segs)-1] {
		fi, err := os.Stat(s.path)
		require.NoError(t, err)
		require.Equal(t, s.written.Load(), fi.Size())
	}
	fi, err := os.Stat(segs[len(segs)-1].path)
	require.NoError(t, err)
	require.EqualValues(t, 4096, fi.Size(), "the active segment is preallocated")
}

// TestIndexRebuiltEqualsWritten: deleting every index forces a rebuild that
// must produce the same bytes the seal wrote.
func TestIndexRebuiltEqualsWritten(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 8192, IndexSpacingBytes: 512}
	l := openLog(t, dir, cfg)
	for i := range 200 {
		_, err := l.Append([][]byte{payload(i, i%150), payload(i+1, 40)}, int64(i))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	indexes := segFiles(t, dir, "index")
	require.NotEmpty(t, indexes)
	written := map[string][]byte{}
	for _, p := range indexes {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Greater(t, len(b), IndexHeaderBytes+IndexEntryBytes, "sparse index has several entries")
		written[p] = b
		require.NoError(t, os.Remove(p))
	}
	l2 := openLog(t, dir, cfg)
	require.Equal(t, len(indexes), l2.Stats().Recovery.IndexesRebuilt)
	for p, want := range written {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, want, got, p)
	}
	// A garbage index is also rebuilt, and reads still work through it.
	require.NoError(t, l2.Close())
	require.NoError(t, os.WriteFile(indexes[0], []byte("garbage garbage garbage garbage"), 0o644))
	l3 := openLog(t, dir, cfg)
	require.Equal(t, 1, l3.Stats().Recovery.IndexesRebuilt)
	require.Len(t, readAll(t, l3, 0), 400)
}

// TestIndexSeekFindsEveryOffset reads from every offset through the index.
func TestIndexSeekFindsEveryOffset(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 4096, IndexSpacingBytes: 128})
	for i := range 100 {
		_, err := l.Append([][]byte{payload(i, 20+i%90)}, int64(i))
		require.NoError(t, err)
	}
	for off := range uint64(100) {
		var got []uint64
		next, err := l.Read(off, 0, func(o uint64, ts int64, p []byte) bool {
			got = append(got, o)
			require.Equal(t, payload(int(o), 20+int(o)%90), p)
			return true
		})
		require.NoError(t, err)
		require.Equal(t, []uint64{off}, got, "maxBytes 0 still delivers one record")
		require.Equal(t, off+1, next)
	}
}

func TestAppendRejects(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 4096})
	_, err := l.Append(nil, 1)
	require.ErrorIs(t, err, ErrEmptyBatch)
	_, err = l.Append([][]byte{make([]byte, MaxPayloadBytes+1)}, 1)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	_, err = l.Append([][]byte{[]byte("ok")}, 1)
	require.NoError(t, err, "rejections are not terminal")
	require.NoError(t, l.Close())
	_, err = l.Append([][]byte{[]byte("x")}, 1)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, l.Close(), "Close is idempotent")
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{
		{SegmentBytes: 10},
		{IndexSpacingBytes: -1},
		{RetentionBytes: -1},
		{RetentionAge: -1},
	} {
		_, err := Open(t.TempDir(), cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
}

func TestReadBudgetAndStop(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 4096})
	for i := range 10 {
		_, err := l.Append([][]byte{payload(i, 100)}, 1)
		require.NoError(t, err)
	}
	n := 0
	next, err := l.Read(0, 350, func(uint64, int64, []byte) bool { n++; return true })
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, uint64(3), next)
	next, err = l.Read(3, 1<<20, func(o uint64, _ int64, _ []byte) bool { return o < 5 })
	require.NoError(t, err)
	require.Equal(t, uint64(6), next)
}
