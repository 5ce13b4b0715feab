package segment

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the generated seeds in testdata/fuzz")

func batchesOf(t *testing.T, l *Log, from uint64) []MarkedBatch {
	t.Helper()
	var out []MarkedBatch
	require.NoError(t, l.Batches(from, func(b MarkedBatch) bool { out = append(out, b); return true }))
	return out
}

// TestMarkedBatchesReadBack: marks come back from readers and from Batches,
// before and after a reopen, across rolls, and mixed with unmarked batches.
func TestMarkedBatchesReadBack(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 1024, IndexSpacingBytes: 128}
	l := openLog(t, dir, cfg)
	var want []MarkedBatch
	for i := range 30 {
		batch := [][]byte{payload(i, 40), payload(i+1, 3), payload(i+2, 70)}
		if i%3 == 2 {
			_, err := l.Append(batch[:1], int64(i))
			require.NoError(t, err)
			continue
		}
		first, err := l.AppendMarked(batch, int64(i), &BatchMark{ProducerID: uint64(i % 2), Sequence: uint64(i)})
		require.NoError(t, err)
		want = append(want, MarkedBatch{First: first, ProducerID: uint64(i % 2), Sequence: uint64(i), Len: 3, Held: 3, TimestampMicros: int64(i)})
	}
	require.Greater(t, len(segFiles(t, dir, "log")), 3, "the batches span rolls")
	require.Equal(t, want, batchesOf(t, l, 0))
	require.Equal(t, want[5:], batchesOf(t, l, want[5].First))
	require.Equal(t, want[6:], batchesOf(t, l, want[5].First+1))

	recs := readAll(t, l, want[1].First)
	require.Equal(t, Mark{Kind: MarkOpens, ProducerID: 1, Sequence: 1, Len: 3}, recs[0].Mark)
	require.Equal(t, Mark{Kind: MarkContinues}, recs[1].Mark)
	require.Equal(t, Mark{Kind: MarkContinues}, recs[2].Mark)

	require.NoError(t, l.Close())
	l = openLog(t, dir, Config{SegmentBytes: 1024, IndexSpacingBytes: 128, VerifyAllOnOpen: true})
	require.Zero(t, l.Stats().Recovery.IncompleteBatches)
	require.Equal(t, want, batchesOf(t, l, 0))
	n := 0
	require.NoError(t, l.Batches(0, func(MarkedBatch) bool { n++; return n < 4 }))
	require.Equal(t, 4, n, "fn false stops the walk")
}

// writeV2Log writes a v2 log as a build before format v3 left it: one
// sealed segment and an active one, unmarked records (the same bytes in
// both versions), the active one preallocated with zeros.
func writeV2Log(t *testing.T, dir string, segBytes int) (next uint64) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	sealed := AppendSegmentHeader(nil, SegmentHeader{Version: FormatVersionV2, BaseOffset: 0, CreatedAtMicros: 1})
	for i := range 5 {
		sealed = AppendRecord(sealed, uint64(i), int64(i), payload(i, 30))
	}
	require.NoError(t, os.WriteFile(logPath(dir, 0), sealed, 0o644))
	active := AppendSegmentHeader(nil, SegmentHeader{Version: FormatVersionV2, BaseOffset: 5, CreatedAtMicros: 2})
	for i := 5; i < 8; i++ {
		active = AppendRecord(active, uint64(i), int64(i), payload(i, 30))
	}
	require.NoError(t, os.WriteFile(logPath(dir, 5), append(active, make([]byte, segBytes-len(active))...), 0o644))
	return 8
}

func segmentVersion(t *testing.T, path string) uint16 {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return be.Uint16(b[4:])
}

// TestV2LogOpensAppendsAndVerifies: a v2 log opens; unmarked appends go on
// in its v2 active segment (readable by a build that knows only v2); the
// first marked batch rolls to a v3 segment; everything verifies and reads
// back after a reopen.
func TestV2LogOpensAppendsAndVerifies(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 4096, IndexSpacingBytes: 64}
	next := writeV2Log(t, dir, 4096)
	l := openLog(t, dir, cfg)
	require.Equal(t, next, l.Next())
	first, err := l.Append([][]byte{[]byte("plain")}, 9)
	require.NoError(t, err)
	require.Equal(t, next, first)
	require.Len(t, segFiles(t, dir, "log"), 2, "unmarked records stay in the v2 segment")
	require.Equal(t, FormatVersionV2, segmentVersion(t, logPath(dir, 5)))
	marked, err := l.AppendMarked([][]byte{[]byte("m1"), []byte("m2")}, 10, &BatchMark{ProducerID: 7, Sequence: 0})
	require.NoError(t, err)
	require.Equal(t, next+1, marked)
	require.Len(t, segFiles(t, dir, "log"), 3, "the first mark rolls to a v3 segment")
	require.Equal(t, FormatVersion, segmentVersion(t, logPath(dir, marked)))
	_, err = l.Append([][]byte{[]byte("after")}, 11)
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())

	l = openLog(t, dir, Config{SegmentBytes: 4096, IndexSpacingBytes: 64, VerifyAllOnOpen: true})
	recs := readAll(t, l, 0)
	require.Len(t, recs, int(next)+4)
	for i := range 8 {
		require.Equal(t, payload(i, 30), recs[i].Payload)
	}
	require.Equal(t, "plain", string(recs[8].Payload))
	require.Equal(t, Mark{Kind: MarkOpens, ProducerID: 7, Sequence: 0, Len: 2}, recs[9].Mark)
	require.Equal(t, "after", string(recs[11].Payload))
	require.Equal(t, []MarkedBatch{{First: marked, ProducerID: 7, Len: 2, Held: 2, TimestampMicros: 10}}, batchesOf(t, l, 0))
	require.Equal(t, FormatVersionV2, segmentVersion(t, logPath(dir, 0)), "sealed v2 segments are never rewritten")
}

// tornBatchLog is a log's active segment contents: two unmarked records,
// then a marked batch of three, and where the batch starts.
func tornBatchLog() (contents []byte, batchAt int) {
	contents = AppendRecord(nil, 0, 1, payload(0, 9))
	contents = AppendRecord(contents, 1, 1, payload(1, 4))
	batchAt = len(contents)
	contents = AppendMarkedRecord(contents, 2, 2, Mark{Kind: MarkOpens, ProducerID: 9, Sequence: 4, Len: 3}, payload(2, 5))
	contents = AppendMarkedRecord(contents, 3, 2, Mark{Kind: MarkContinues}, payload(3, 1))
	contents = AppendMarkedRecord(contents, 4, 2, Mark{Kind: MarkContinues}, payload(4, 6))
	return contents, batchAt
}

// crashStates returns what a crash during the copy of contents[from:] into
// a mapping can leave, in putRecord's order, record by record: every prefix
// of the body under a header still all zero, then the header stored up to
// its CRC word, then the whole record; what follows stays zero.
func crashStates(t *testing.T, contents []byte, from int) [][]byte {
	var states [][]byte
	for q := from; q < len(contents); {
		h, v := decodeRecordHeader(contents[q:], FormatVersion)
		require.Equal(t, decodeOK, v)
		end := q + int(h.size())
		bodyAt := end - int(h.length)
		for j := bodyAt; j <= end; j++ {
			b := make([]byte, end)
			copy(b, contents[:q])
			copy(b[bodyAt:j], contents[bodyAt:j])
			states = append(states, b)
		}
		b := append([]byte(nil), contents[:end]...)
		clear(b[q+20 : q+24])
		states = append(states, b)
		q = end
	}
	return append(states, contents)
}

// TestTornMarkedBatchAtEveryByte crashes the copy of a marked batch at
// every byte it stores: recovery keeps the records before the batch and
// drops the batch whole until its last record is committed, and a second
// recovery changes nothing.
func TestTornMarkedBatchAtEveryByte(t *testing.T) {
	contents, batchAt := tornBatchLog()
	for i, state := range crashStates(t, contents, batchAt) {
		dir := t.TempDir()
		writeActive(t, dir, append(append([]byte(nil), state...), make([]byte, 512)...))
		l, err := Open(dir, Config{SegmentBytes: 4096})
		require.NoError(t, err, "state %d", i)
		want := uint64(2)
		if bytes.Equal(state, contents) {
			want = 5
		}
		require.Equal(t, want, l.Next(), "state %d", i)
		if want == 2 && len(bytes.TrimRight(state[batchAt:], "\x00")) > 0 {
			require.Positive(t, l.Stats().Recovery.TruncatedRecords, "state %d", i)
		}
		recs := readAll(t, l, 0)
		require.Len(t, recs, int(want))
		require.NoError(t, l.Close())
		l, err = Open(dir, Config{SegmentBytes: 4096})
		require.NoError(t, err)
		require.Equal(t, want, l.Next())
		require.Zero(t, l.Stats().Recovery.TruncatedRecords, "recovery is idempotent (state %d)", i)
		next, err := l.AppendMarked([][]byte{[]byte("again")}, 3, &BatchMark{ProducerID: 9, Sequence: 4})
		require.NoError(t, err)
		require.Equal(t, want, next, "the re-sent batch takes the dropped batch's offsets")
		require.NoError(t, l.Close())
	}
}

// TestIncompleteBatchBeforeTheTailIsKept: a batch left short by another
// writer, with records after it, is not corruption: it is kept, counted,
// and Batches reports what it holds.
func TestIncompleteBatchBeforeTheTailIsKept(t *testing.T) {
	dir := t.TempDir()
	c := AppendMarkedRecord(nil, 0, 1, Mark{Kind: MarkOpens, ProducerID: 1, Sequence: 0, Len: 3}, []byte("a"))
	c = AppendMarkedRecord(c, 1, 1, Mark{Kind: MarkContinues}, []byte("b"))
	c = AppendRecord(c, 2, 1, []byte("plain"))
	c = AppendMarkedRecord(c, 3, 1, Mark{Kind: MarkOpens, ProducerID: 1, Sequence: 1, Len: 1}, []byte("c"))
	writeActive(t, dir, append(c, make([]byte, 512)...))
	l := openLog(t, dir, Config{SegmentBytes: 4096})
	require.Equal(t, uint64(4), l.Next())
	require.Equal(t, int64(1), l.Stats().Recovery.IncompleteBatches)
	require.Equal(t, []MarkedBatch{
		{First: 0, ProducerID: 1, Sequence: 0, Len: 3, Held: 2, TimestampMicros: 1},
		{First: 3, ProducerID: 1, Sequence: 1, Len: 1, Held: 1, TimestampMicros: 1},
	}, batchesOf(t, l, 0))
}

// TestRecoverySeeds keeps testdata/fuzz/FuzzRecovery's generated seeds
// current: the torn-batch log cut at every byte of its marked batch, with
// zeros after (a crash) and with a stray byte after (damage at the tail).
func TestRecoverySeeds(t *testing.T) {
	contents, batchAt := tornBatchLog()
	for cut := batchAt; cut <= len(contents); cut++ {
		for _, tail := range []struct {
			name  string
			bytes []byte
		}{{"zeros", make([]byte, 8)}, {"junk", []byte{0, 0, 0, 0, 0, 0, 0, 7}}} {
			seed := append(append([]byte(nil), contents[:cut]...), tail.bytes...)
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(false)\n[]byte(\"\")\n", seed)
			path := filepath.Join("testdata", "fuzz", "FuzzRecovery", fmt.Sprintf("torn_marked_batch_%03d_%s", cut-batchAt, tail.name))
			if *updateCorpus {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
				continue
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./segment -run TestRecoverySeeds -update-corpus")
			require.Equal(t, body, string(got), path)
		}
	}
}
