package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

var logTestTime = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

// logPayload is the payload of record i: text for even i, binary for odd.
func logPayload(i int) []byte {
	if i%2 == 0 {
		return fmt.Appendf(nil, "event %d", i)
	}
	return []byte{0, byte(i), 0xff, 'x'}
}

// writeTestLog writes n records in batches of four into a log of small
// segments (so several are sealed) and returns the directory.
func writeTestLog(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shard")
	l, err := segment.Open(dir, segment.Config{SegmentBytes: 512, IndexSpacingBytes: 64})
	require.NoError(t, err)
	for i := 0; i < n; i += 4 {
		var batch [][]byte
		for j := i; j < min(i+4, n); j++ {
			batch = append(batch, logPayload(j))
		}
		_, err := l.Append(batch, logTestTime.UnixMicro())
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	require.GreaterOrEqual(t, l.Stats().Segments, 3, "the test needs sealed segments")
	require.NoError(t, l.Close())
	return dir
}

// snapshotDir returns every file of dir with its contents.
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

func runFelix(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestLogVerifyCleanLogPassesAndChangesNothing(t *testing.T) {
	dir := writeTestLog(t, 40)
	before := snapshotDir(t, dir)
	code, out, errOut := runFelix("log", "verify", dir)
	require.Equal(t, exitOK, code, "stdout: %s stderr: %s", out, errOut)
	require.Contains(t, out, "ok "+dir)
	require.Contains(t, out, "records [0, 40)")
	require.Contains(t, out, "40 records", "VerifyAllOnOpen: every record checked")
	require.Equal(t, before, snapshotDir(t, dir))
}

// A flipped payload byte in a sealed segment, before its last index entry
// where a normal open does not look: verify scans everything, fails with
// exit 1 and names the file and the byte where the damaged record starts.
func TestLogVerifyCorruptSealedSegmentNamesFileAndByte(t *testing.T) {
	dir := writeTestLog(t, 40)
	sealed := filepath.Join(dir, fmt.Sprintf("%020d.log", 0))
	b, err := os.ReadFile(sealed)
	require.NoError(t, err)
	b[segment.SegmentHeaderBytes+segment.RecordHeaderBytes+1] ^= 0x40 // payload of record 0
	require.NoError(t, os.WriteFile(sealed, b, 0o644))
	before := snapshotDir(t, dir)

	code, out, _ := runFelix("log", "verify", dir)
	require.Equal(t, exitFail, code, out)
	require.Contains(t, out, fmt.Sprintf("FAIL %s: %s at %s byte %d", dir, segment.KindRecordChecksum, sealed, segment.SegmentHeaderBytes))
	require.Equal(t, before, snapshotDir(t, dir))

	// dump reads through the same record and stops on it the same way.
	code, out, _ = runFelix("log", "dump", dir)
	require.Equal(t, exitFail, code)
	require.Contains(t, out, fmt.Sprintf("at %s byte %d", sealed, segment.SegmentHeaderBytes))
}

// A torn write at the tail of the active segment is what a crash leaves;
// recovery cuts it. verify reports the cut and leaves the bytes in place.
func TestLogVerifyReportsTornTailWithoutCuttingIt(t *testing.T) {
	dir := writeTestLog(t, 40)
	files, err := segmentFiles(dir)
	require.NoError(t, err)
	active := files[len(files)-1].path
	b, err := os.ReadFile(active)
	require.NoError(t, err)
	end := bytes.LastIndexByte(b, 'x') + 1 // the last record (i=39) ends in 'x'
	// What a writer killed mid-record leaves: the body, and the header
	// without its CRC word, which the writer stores last.
	torn := segment.AppendRecord(nil, 40, logTestTime.UnixMicro(), []byte("never acked"))
	clear(torn[20:24])
	copy(b[end:], torn)
	require.NoError(t, os.WriteFile(active, b, 0o644))
	before := snapshotDir(t, dir)

	code, out, errOut := runFelix("log", "verify", dir)
	require.Equal(t, exitOK, code, "stdout: %s stderr: %s", out, errOut)
	require.Contains(t, out, "records [0, 40)")
	require.Contains(t, out, "recovery would cut a torn tail: 1 records")
	require.Contains(t, out, "recovery would write back bytes")
	require.Equal(t, before, snapshotDir(t, dir), "verify changes nothing")
}

func TestLogDumpPrintsRecordsFromOffset(t *testing.T) {
	dir := writeTestLog(t, 40)
	code, out, errOut := runFelix("log", "dump", dir, "--from", "6", "--count", "2")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "offset=6 time=2026-01-02T03:04:05.123456Z len=7 payload=event 6\n"+
		"offset=7 time=2026-01-02T03:04:05.123456Z len=4 payload=0x0007ff78\n", out)

	code, out, _ = runFelix("log", "dump", "--count", "0", dir)
	require.Equal(t, exitOK, code)
	require.Len(t, strings.Split(strings.TrimSuffix(out, "\n"), "\n"), 40, "count 0 is all")

	code, out, _ = runFelix("log", "dump", dir, "--from", "40")
	require.Equal(t, exitOK, code)
	require.Empty(t, out, "from Next: nothing")
}

func TestLogStatListsSegmentsAndIndexHealth(t *testing.T) {
	dir := writeTestLog(t, 40)
	files, err := segmentFiles(dir)
	require.NoError(t, err)
	missing := files[1].indexPath
	require.NoError(t, os.Remove(missing))
	before := snapshotDir(t, dir)

	code, out, errOut := runFelix("log", "stat", dir)
	require.Equal(t, exitOK, code, errOut)
	for _, f := range files {
		require.Contains(t, out, filepath.Base(f.path))
	}
	require.Contains(t, out, "entries, ok")
	require.Contains(t, out, "recovery would rebuild it")
	require.Contains(t, out, "none (active")
	require.Contains(t, out, "first 0\nnext 40\n")
	require.Contains(t, out, fmt.Sprintf("segments %d\n", len(files)))
	require.Contains(t, out, "indexes_rebuilt 1\n")
	require.Equal(t, before, snapshotDir(t, dir), "stat does not write the rebuilt index")

	code, out, errOut = runFelix("log", "stat", "--json", dir)
	require.Equal(t, exitOK, code, errOut)
	var rep statReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, uint64(40), rep.Next)
	require.Len(t, rep.Files, len(files))
}

func TestLogUsageAndMissingDirectory(t *testing.T) {
	code, _, errOut := runFelix("log")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "felix log verify DIR")
	code, _, _ = runFelix("log", "fsck", "x")
	require.Equal(t, exitUsage, code)
	code, _, _ = runFelix("log", "verify", "a", "b")
	require.Equal(t, exitUsage, code)
	code, _, _ = runFelix("log", "dump", "--from", "x", "d")
	require.Equal(t, exitUsage, code)

	missing := filepath.Join(t.TempDir(), "nope")
	code, _, errOut = runFelix("log", "stat", missing)
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, missing)
	require.NoDirExists(t, missing, "no log is created")

	empty := t.TempDir()
	code, _, errOut = runFelix("log", "verify", empty)
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "no segment files")
	require.Empty(t, snapshotDir(t, empty))
}

// A log with idempotent producers' batches (format v3): dump shows each
// record's producer, sequence and place in its batch; stat counts the
// batches and shows the segment versions; verify passes.
func TestLogToolsShowProducerMarks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shard")
	l, err := segment.Open(dir, segment.Config{SegmentBytes: 4096})
	require.NoError(t, err)
	_, err = l.Append([][]byte{[]byte("plain")}, logTestTime.UnixMicro())
	require.NoError(t, err)
	_, err = l.AppendMarked([][]byte{[]byte("a"), []byte("b")}, logTestTime.UnixMicro(), &segment.BatchMark{ProducerID: 77, Sequence: 5})
	require.NoError(t, err)
	_, err = l.AppendMarked([][]byte{[]byte("c")}, logTestTime.UnixMicro(), &segment.BatchMark{ProducerID: 78, Sequence: 0})
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())

	code, out, errOut := runFelix("log", "dump", dir)
	require.Equal(t, exitOK, code, errOut)
	ts := "time=2026-01-02T03:04:05.123456Z"
	require.Equal(t, "offset=0 "+ts+" len=5 payload=plain\n"+
		"offset=1 "+ts+" len=1 producer=77 sequence=5 batch=1/2 payload=a\n"+
		"offset=2 "+ts+" len=1 producer=77 sequence=5 batch=2/2 payload=b\n"+
		"offset=3 "+ts+" len=1 producer=78 sequence=0 batch=1/1 payload=c\n", out)
	code, out, _ = runFelix("log", "dump", dir, "--from", "2", "--count", "1")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "len=1 batch=continues payload=b", "a batch whose opening record was not read")

	code, out, _ = runFelix("log", "stat", dir)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "producer_batches 2\nproducers 2\n")
	require.Regexp(t, `00000000000000000000\.log\s+3\s`, out)

	code, out, _ = runFelix("log", "verify", dir)
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "records [0, 4)")
}

// A v2 log, as builds before format v3 wrote it, verifies and stats.
func TestLogToolsReadV2Logs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shard")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	b := segment.AppendSegmentHeader(nil, segment.SegmentHeader{Version: segment.FormatVersionV2})
	for i := range 3 {
		b = segment.AppendRecord(b, uint64(i), logTestTime.UnixMicro(), logPayload(i))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.log", 0)), append(b, make([]byte, 256)...), 0o644))
	code, out, _ := runFelix("log", "verify", dir)
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "records [0, 3)")
	code, out, _ = runFelix("log", "stat", dir)
	require.Equal(t, exitOK, code)
	require.Regexp(t, `00000000000000000000\.log\s+2\s`, out)
	require.Contains(t, out, "producer_batches 0\n")
}

// felix log dump shows a record's publisher and event headers, as text and
// as JSON.
func TestLogDumpShowsPublisherAndHeaders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shard")
	l, err := segment.Open(dir, segment.Config{SegmentBytes: 4096})
	require.NoError(t, err)
	hs, err := wire.AppendHeaders(nil, []wire.EventHeader{{Key: "traceparent", Value: "00-ab-01"}, {Key: "k", Value: "a b"}})
	require.NoError(t, err)
	_, err = l.AppendBatch(&segment.Batch{Payloads: [][]byte{[]byte("x"), []byte("y")}, TS: logTestTime.UnixMicro(),
		Publisher: []byte("svc-a"), Headers: [][]byte{hs, nil}})
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())

	code, out, errOut := runFelix("log", "dump", dir)
	require.Equal(t, exitOK, code, errOut)
	ts := "time=2026-01-02T03:04:05.123456Z"
	require.Equal(t, "offset=0 "+ts+` len=1 publisher=svc-a headers=[traceparent=00-ab-01 k="a b"] payload=x`+"\n"+
		"offset=1 "+ts+" len=1 publisher=svc-a payload=y\n", out)

	code, out, errOut = runFelix("log", "dump", "--json", "--count", "1", dir)
	require.Equal(t, exitOK, code, errOut)
	require.JSONEq(t, `{"offset":0,"time":"2026-01-02T03:04:05.123456Z","len":1,"publisher":"svc-a",`+
		`"headers":[{"key":"traceparent","value":"00-ab-01"},{"key":"k","value":"a b"}],"payload":"x"}`, out)
}
