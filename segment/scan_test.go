package segment

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClassifyTail drives the pure verdict function over byte slices, one
// row per line of the verdict table in docs/storage-format.md.
func TestClassifyTail(t *testing.T) {
	good := AppendRecord(nil, 0, 1, payload(1, 100))
	next := AppendRecord(nil, 1, 1, payload(2, 100))
	pad := func(b []byte, n int) []byte { return append(b, make([]byte, n)...) }
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for name, tc := range map[string]struct {
		data []byte
		want tailAction
	}{
		"clean end":                  {pad(good, 500), tailClean},
		"clean end at end of file":   {good, tailClean},
		"header cut off by EOF":      {cat(good, next[:20]), tailTorn},
		"record cut off by EOF":      {cat(good, next[:60]), tailTorn},
		"header past written extent": {pad(cat(good, next[:20]), 300), tailTorn},
		"payload past extent":        {pad(cat(good, next[:60]), 300), tailTorn},
		"zero header then junk":      {cat(pad(good, 100), []byte{7}, make([]byte, 100)), tailTorn},
		"header crc inside extent":   {pad(cat(good, flip(next, 3)), 10), tailDamage},
		"payload crc inside extent":  {pad(cat(good, flip(next, 40)), 10), tailDamage},
		"offset gap":                 {pad(cat(good, AppendRecord(nil, 5, 1, []byte("x"))), 10), tailDamage},
	} {
		t.Run(name, func(t *testing.T) {
			r := scan(tc.data, FormatVersion, 0, int64(len(tc.data)), 0, nil, 4096)
			require.Equal(t, int64(len(good)), r.end)
			got := classifyTail(tc.data, r, writtenExtent(tc.data, r.end))
			require.Equal(t, tc.want, got)
		})
	}
}

func TestValidRecordAfter(t *testing.T) {
	junk := []byte("not a record at all, just junk bytes here....")
	later := AppendRecord(nil, 3, 1, []byte("later"))
	data := append(append([]byte(nil), junk...), later...)
	require.True(t, validRecordAfter(data, 0, int64(len(data)), 2))
	require.False(t, validRecordAfter(data, 0, int64(len(data)), 4), "offsets below expect are not evidence")
	require.False(t, validRecordAfter(junk, 0, int64(len(junk)), 0))
}

// TestRecoveryRecreatesDiscardedOnlySegment: a crash during the very first
// create leaves one all-zero file; the log starts again at its base.
func TestRecoveryRecreatesDiscardedOnlySegment(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(logPath(dir, 42), make([]byte, 4096), 0o644))
	l := openLog(t, dir, Config{SegmentBytes: 4096})
	require.Equal(t, uint64(42), l.Next())
	require.Equal(t, 1, l.Stats().Recovery.SegmentsDiscarded)
	off, err := l.Append([][]byte{[]byte("x")}, 1)
	require.NoError(t, err)
	require.Equal(t, uint64(42), off)
}
