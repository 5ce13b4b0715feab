package segment

import (
	"fmt"
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
	for name, tc := range map[string]struct {
		data []byte
		want tailAction
	}{
		"clean end":                       {pad(good, 500), tailClean},
		"clean end at end of file":        {good, tailClean},
		"header cut off by EOF":           {cat(good, next[:20]), tailTorn},
		"record cut off by EOF":           {cat(good, next[:60]), tailTorn},
		"header never committed":          {pad(cat(good, next[:20]), 300), tailTorn},
		"zero header then junk":           {cat(pad(good, 100), []byte{7}, make([]byte, 100)), tailTorn},
		"body missing in header's sector": {pad(cat(good, next[:60]), 300), tailDamage},
		"header crc inside extent":        {pad(cat(good, flip(next, 3)), 10), tailDamage},
		"payload crc inside extent":       {pad(cat(good, flip(next, 40)), 10), tailDamage},
		"offset gap":                      {pad(cat(good, AppendRecord(nil, 5, 1, []byte("x"))), 10), tailDamage},
		"valid record after the damage": {pad(cat(good, flip(next, 40), AppendRecord(nil, 2, 1, []byte("x"))), 10),
			tailInterior},
	} {
		t.Run(name, func(t *testing.T) {
			requireVerdict(t, tc.data, int64(len(good)), tc.want)
		})
	}
}

func requireVerdict(t *testing.T, data []byte, end int64, want tailAction) {
	t.Helper()
	r := scan(data, FormatVersion, 0, int64(len(data)), 0, nil, 4096)
	require.Equal(t, end, r.end)
	require.Equal(t, want, classifyTail(data, r, writtenExtent(data, r.end)))
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestTailVerdictIgnoresTrailingZeros: a complete last record with a bad
// checksum is damage whether or not its payload ends in zeros, and torn
// when a sector of it is lost, at every sector boundary it spans. Only a
// record whose bytes in a whole sector are zeros is read as torn: then it
// cannot be told from a lost one.
func TestTailVerdictIgnoresTrailingZeros(t *testing.T) {
	good := AppendRecord(nil, 0, 1, payload(1, 100)) // 128 bytes
	const end = 6*tearUnit + 400                     // the bad record's last sector holds 400 of its bytes
	for _, zeros := range []int{0, 1, 100, 399, 400} {
		p := payload(2, end-len(good)-RecordHeaderBytes)
		for i := len(p) - zeros; i < len(p); i++ {
			p[i] = 0
		}
		rec := AppendRecord(nil, 1, 1, p)
		file := func(mut func(b []byte)) []byte {
			b := cat(good, rec, make([]byte, 3*tearUnit))
			mut(b)
			return b
		}
		damaged := tailDamage
		if zeros == 400 {
			damaged = tailTorn // the whole last sector is zeros
		}
		for _, at := range []int{len(good) + RecordHeaderBytes + 7, 3000, end - zeros - 1} {
			t.Run(fmt.Sprintf("zeros %d damaged at %d", zeros, at), func(t *testing.T) {
				requireVerdict(t, file(func(b []byte) { b[at] ^= 0x10 }), int64(len(good)), damaged)
			})
		}
		for q := tearUnit; q < end-zeros; q += tearUnit { // past end-zeros a loss changes nothing
			t.Run(fmt.Sprintf("zeros %d lost from %d", zeros, q), func(t *testing.T) {
				requireVerdict(t, file(func(b []byte) { clear(b[q:end]) }), int64(len(good)), tailTorn)
			})
			t.Run(fmt.Sprintf("zeros %d lost sector %d", zeros, q), func(t *testing.T) {
				requireVerdict(t, file(func(b []byte) { clear(b[q : q+tearUnit]) }), int64(len(good)), tailTorn)
			})
		}
	}
}

// TestTailVerdictHeaderAcrossSectors: a header split by a sector boundary
// whose second sector was lost is torn, wherever the boundary cuts it.
func TestTailVerdictHeaderAcrossSectors(t *testing.T) {
	for cut := 1; cut < RecordHeaderBytes; cut++ {
		good := AppendRecord(nil, 0, 1, payload(1, tearUnit-cut-RecordHeaderBytes))
		b := cat(good, AppendRecord(nil, 1, 1, payload(2, 700)), make([]byte, tearUnit))
		clear(b[tearUnit : 2*tearUnit])
		requireVerdict(t, b, int64(len(good)), tailTorn)
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
