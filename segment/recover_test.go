package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const fixtureRecords = 80

// fixture is a closed log with several sealed segments and an active one.
type fixture struct {
	dir     string
	cfg     Config
	want    []Record
	active  string // path of the newest segment
	end     int64  // end of its contents
	next    uint64
	sealed  []string
	lastPos int64 // position of the last record in the active segment
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), cfg: Config{SegmentBytes: 4096, IndexSpacingBytes: 512}}
	l, err := Open(f.dir, f.cfg)
	require.NoError(t, err)
	for i := range fixtureRecords {
		p := payload(i, 100+i%7)
		off, err := l.Append([][]byte{p}, int64(i))
		require.NoError(t, err)
		f.want = append(f.want, Record{Offset: off, TimestampMicros: int64(i), Payload: p})
	}
	require.NoError(t, l.Sync())
	l.mu.Lock()
	for _, s := range l.mu.segs[:len(l.mu.segs)-1] {
		f.sealed = append(f.sealed, s.path)
	}
	a := l.mu.segs[len(l.mu.segs)-1]
	f.active, f.end, f.next = a.path, a.written.Load(), a.next
	f.lastPos = f.end - int64(RecordHeaderBytes+len(f.want[len(f.want)-1].Payload))
	l.mu.Unlock()
	require.NoError(t, l.Close())
	require.GreaterOrEqual(t, len(f.sealed), 2)
	require.Greater(t, f.lastPos, int64(SegmentHeaderBytes), "active segment holds records")
	return f
}

func (f *fixture) writeAt(t *testing.T, off int64, b []byte) {
	t.Helper()
	file, err := os.OpenFile(f.active, os.O_RDWR, 0)
	require.NoError(t, err)
	defer file.Close()
	_, err = file.WriteAt(b, off)
	require.NoError(t, err)
}

func (f *fixture) open(t *testing.T, repair bool) (*Log, error) {
	cfg := f.cfg
	cfg.RepairChecksumTail = repair
	l, err := Open(f.dir, cfg)
	if err == nil {
		t.Cleanup(func() { _ = l.Close() })
	}
	return l, err
}

// requireIntact opens the log and checks the records and that the tail was
// cut by the expected number of bytes and is now zeros.
func (f *fixture) requireIntact(t *testing.T, l *Log, truncated int64) {
	t.Helper()
	require.Equal(t, f.want, readAll(t, l, 0))
	st := l.Stats().Recovery
	require.Equal(t, truncated, st.TruncatedBytes)
	require.Equal(t, map[bool]int64{false: 0, true: 1}[truncated > 0], st.TruncatedRecords)
	b, err := os.ReadFile(f.active)
	require.NoError(t, err)
	require.Equal(t, make([]byte, len(b)-int(f.end)), b[f.end:], "tail is zeros")
}

func requireCorrupt(t *testing.T, err error, path string, off int64, kind CorruptionKind) {
	t.Helper()
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, path, ce.Path)
	require.Equal(t, off, ce.Offset)
	require.Equal(t, kind, ce.Kind)
	require.Contains(t, err.Error(), filepath.Base(path))
}

// TestRecoveryTornTailAlwaysTruncated: every shape of an unfinished write at
// the end of the active segment is cut, with or without the repair flag.
func TestRecoveryTornTailAlwaysTruncated(t *testing.T) {
	rec := AppendRecord(nil, fixtureRecords, 99, payload(9, 300))
	big := AppendRecord(nil, fixtureRecords, 99, payload(9, 3000))
	for name, tc := range map[string]struct {
		bytes []byte
		at    int64 // relative to the end of the contents
	}{
		"body copied, header zero":   {cat(make([]byte, RecordHeaderBytes), rec[RecordHeaderBytes:RecordHeaderBytes+150]), 0},
		"header half written":        {rec[:10], 0},
		"header without commit word": {cat(rec[:20], make([]byte, 4), rec[24:]), 0},
		"payload lost past a sector": {big[:RecordHeaderBytes+1000], 0},
		"zero header then junk":      {[]byte{1, 2, 3}, 200},
		"junk page after a zero gap": {rec, 1000},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.writeAt(t, f.end+tc.at, tc.bytes)
			// The written extent ends at the last non-zero byte.
			wantCut := tc.at + int64(len(bytes.TrimRight(tc.bytes, "\x00")))
			l, err := f.open(t, false)
			require.NoError(t, err)
			f.requireIntact(t, l, wantCut)
			// The cut is durable and final: appends continue at the old end.
			off, err := l.Append([][]byte{[]byte("after")}, 1)
			require.NoError(t, err)
			require.Equal(t, f.next, off)
		})
	}
}

// TestRecoveryDamagedTailNeedsRepairFlag: damage wholly inside the written
// extent at the tail refuses to open, naming file and byte, unless
// RepairChecksumTail; then it is cut.
func TestRecoveryDamagedTailNeedsRepairFlag(t *testing.T) {
	good := AppendRecord(nil, fixtureRecords, 99, payload(3, 64)) // the offset f.next
	zeroEnd := payload(3, 64)
	clear(zeroEnd[40:])
	for name, tc := range map[string]struct {
		bytes []byte
		kind  CorruptionKind
	}{
		"record header crc": {flip(good, 6), KindRecordHeaderChecksum},
		"payload crc":       {flip(good, RecordHeaderBytes+5), KindRecordChecksum},
		"payload ending in zeros": {flip(AppendRecord(nil, fixtureRecords, 99, zeroEnd), RecordHeaderBytes+5),
			KindRecordChecksum},
		"record checksum field": {flip(good, 25), KindRecordChecksum},
		"offset gap":            {AppendRecord(nil, fixtureRecords+7, 99, payload(3, 64)), KindOffsetOutOfOrder},
		"over-limit length":     {encodeHeaderLen(MaxPayloadBytes + 1), KindRecordTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			require.Equal(t, uint64(fixtureRecords), f.next)
			b := tc.bytes
			f.writeAt(t, f.end, b)
			_, err := f.open(t, false)
			requireCorrupt(t, err, f.active, f.end, tc.kind)
			require.Contains(t, err.Error(), "RepairChecksumTail")

			l, err := f.open(t, true)
			require.NoError(t, err)
			f.requireIntact(t, l, int64(len(bytes.TrimRight(b, "\x00"))))
		})
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x10
	return c
}

// TestRecoveryRefusesInteriorCorruption: damage followed by valid records is
// never repaired, flag or not, and the error names the file and byte.
func TestRecoveryRefusesInteriorCorruption(t *testing.T) {
	t.Run("active segment", func(t *testing.T) {
		f := newFixture(t)
		prev := f.lastPos - int64(RecordHeaderBytes+len(f.want[len(f.want)-2].Payload))
		patchFile(t, f.active, prev+RecordHeaderBytes+3, 0x40) // payload of the second-last record
		for _, repair := range []bool{false, true} {
			_, err := f.open(t, repair)
			requireCorrupt(t, err, f.active, prev, KindRecordChecksum)
			require.Contains(t, err.Error(), "valid records follow")
		}
	})
	t.Run("sealed segment after its last index entry", func(t *testing.T) {
		f := newFixture(t)
		size := fileSize(t, f.sealed[0])
		patchFile(t, f.sealed[0], size-2, 0x01) // last payload byte of the segment
		_, err := f.open(t, true)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, f.sealed[0], ce.Path)
		require.Equal(t, KindRecordChecksum, ce.Kind)
	})
	t.Run("sealed segment before its last index entry", func(t *testing.T) {
		f := newFixture(t)
		patchFile(t, f.sealed[0], SegmentHeaderBytes+RecordHeaderBytes+1, 0x01)
		l, err := f.open(t, false)
		require.NoError(t, err, "only the records after the last index entry are verified on open")
		_, err = l.Read(0, 1<<20, func(uint64, int64, []byte) bool { return true })
		requireCorrupt(t, err, f.sealed[0], SegmentHeaderBytes, KindRecordChecksum)
		require.NoError(t, l.Close())

		f.cfg.VerifyAllOnOpen = true
		_, err = f.open(t, true)
		requireCorrupt(t, err, f.sealed[0], SegmentHeaderBytes, KindRecordChecksum)
	})
	t.Run("sealed segment with trailing bytes", func(t *testing.T) {
		f := newFixture(t)
		file, err := os.OpenFile(f.sealed[1], os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = file.Write(make([]byte, 40))
		require.NoError(t, err)
		require.NoError(t, file.Close())
		_, err = f.open(t, true)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, f.sealed[1], ce.Path)
	})
}

func fileSize(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Size()
}

// TestRecoveryRefusesBadSegmentHeaders: never repairable, in any segment.
func TestRecoveryRefusesBadSegmentHeaders(t *testing.T) {
	for name, tc := range map[string]struct {
		off  int64
		mask byte
		kind CorruptionKind
	}{
		"magic":   {0, 0xff, KindSegmentMagic},
		"version": {5, 0x03, KindSegmentVersion},
		"flags":   {7, 0x01, KindSegmentFlags},
		"crc":     {17, 0x01, KindSegmentHeaderChecksum},
	} {
		for _, which := range []string{"sealed", "active"} {
			t.Run(name+"/"+which, func(t *testing.T) {
				f := newFixture(t)
				path := f.active
				if which == "sealed" {
					path = f.sealed[1]
				}
				patchFile(t, path, tc.off, tc.mask)
				_, err := f.open(t, true)
				requireCorrupt(t, err, path, 0, tc.kind)
			})
		}
	}
}

// TestRecoveryRefusesOffsetGapAcrossSegments: a missing middle segment.
func TestRecoveryRefusesOffsetGapAcrossSegments(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.Remove(f.sealed[1]))
	_, err := f.open(t, true)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, KindOffsetGap, ce.Kind)
}

// TestRecoveryDiscardsUninstalledSegment: a roll that crashed before the
// new segment's header was durable leaves an all-zero newest file.
func TestRecoveryDiscardsUninstalledSegment(t *testing.T) {
	f := newFixture(t)
	ghost := logPath(f.dir, f.next)
	require.NoError(t, os.WriteFile(ghost, make([]byte, 4096), 0o644))
	// The crashed roll had sealed the old active segment: trim it.
	require.NoError(t, os.Truncate(f.active, f.end))
	l, err := f.open(t, false)
	require.NoError(t, err)
	require.Equal(t, 1, l.Stats().Recovery.SegmentsDiscarded)
	require.Equal(t, f.want, readAll(t, l, 0))
	require.EqualValues(t, f.end, fileSize(t, f.active), "open preallocates nothing")
	off, err := l.Append([][]byte{[]byte("more")}, 1)
	require.NoError(t, err)
	require.Equal(t, f.next, off)
	require.Greater(t, fileSize(t, f.active), f.end, "the sealed newest segment grows again for the append")
}

// TestRecoveryOrphanIndexRemoved: retention removes .log before .index.
func TestRecoveryOrphanIndexRemoved(t *testing.T) {
	f := newFixture(t)
	orphan := filepath.Join(f.dir, "00000000000000999999.index")
	require.NoError(t, os.WriteFile(orphan, []byte("x"), 0o644))
	_, err := f.open(t, false)
	require.NoError(t, err)
	_, err = os.Stat(orphan)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestRecoveryIdempotent: a crash in the middle of cutting a tail (the
// directory copied right after the first repair write reached the disk)
// leaves a state that a second recovery accepts with the same records; and
// recovering the repaired original again changes nothing.
func TestRecoveryIdempotent(t *testing.T) {
	for name, repair := range map[string]bool{"torn": false, "damaged": true} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			rec := AppendRecord(nil, fixtureRecords, 99, payload(9, 3000))
			if repair {
				rec = flip(rec, RecordHeaderBytes+7)
			} else {
				rec = rec[:RecordHeaderBytes+1000]
			}
			f.writeAt(t, f.end, rec)
			crash := filepath.Join(t.TempDir(), "crash")
			fsys := &faultFS{}
			msyncs := 0
			fsys.set(func(op, p string) error {
				if op == "msynced" {
					// cutTail syncs the zeroed header, then zeroes and syncs
					// the rest: copy the directory between the two, as a
					// crash would leave it.
					if msyncs++; msyncs == 1 {
						copyDir(t, f.dir, crash)
					}
				}
				return nil
			})
			cfg := f.cfg
			cfg.FS, cfg.RepairChecksumTail = fsys, repair
			l, err := Open(f.dir, cfg)
			require.NoError(t, err)
			require.Equal(t, f.want, readAll(t, l, 0))
			require.NoError(t, l.Close())
			require.Equal(t, 2, msyncs)

			// Second recovery of the mid-repair copy: accepted, without the
			// flag, with the same records.
			l2, err := Open(crash, f.cfg)
			require.NoError(t, err)
			require.Equal(t, f.want, readAll(t, l2, 0))
			require.Positive(t, l2.Stats().Recovery.TruncatedBytes, "the copy still had the rest of the tail")
			require.NoError(t, l2.Close())

			// Recovering the repaired original again is a no-op.
			l3, err := Open(f.dir, f.cfg)
			require.NoError(t, err)
			require.Equal(t, f.want, readAll(t, l3, 0))
			require.Zero(t, l3.Stats().Recovery.TruncatedBytes)
			require.NoError(t, l3.Close())
		})
	}
}
