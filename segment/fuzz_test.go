package segment

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRecordDecode: arbitrary bytes as a record never panic; a valid record
// re-encodes to the same bytes; any single bit flip of a valid record is
// detected.
func FuzzRecordDecode(f *testing.F) {
	f.Add(AppendRecord(nil, 7, 9, []byte("hi")), uint16(0))
	f.Add(AppendRecord(nil, 0, 0, nil), uint16(3))
	f.Add(AppendRecord(nil, 1<<40, -5, bytes.Repeat([]byte{0xAB}, 300)), uint16(1000))
	f.Add([]byte{0, 0, 0, 0}, uint16(1))
	f.Add(AppendMarkedRecord(nil, 7, 9, Mark{Kind: MarkOpens, ProducerID: 1, Len: 2}, []byte("hi")), uint16(300))
	f.Add(AppendMarkedRecord(nil, 8, 9, Mark{Kind: MarkContinues}, []byte("hi")), uint16(7))
	f.Add(AppendFullRecord(nil, Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi"), Publisher: []byte("al")}), uint16(9))
	f.Add(AppendFullRecord(nil, Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi"), Publisher: []byte("al"),
		Headers: []byte{1, 1, 'k', 0, 1, 'v'}, Mark: Mark{Kind: MarkOpens, ProducerID: 1, Len: 1}}), uint16(11))
	f.Fuzz(func(t *testing.T, b []byte, flipAt uint16) {
		// An odd flipAt decodes as the most permissive version we read.
		version := FormatVersion
		if flipAt%2 == 1 {
			version = FormatVersionHeaders
		}
		rec, n, err := DecodeVersionRecord(b, version)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		enc := AppendFullRecord(nil, rec)
		if !bytes.Equal(enc, b[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", enc, b[:n])
		}
		bit := int(flipAt) % (n * 8)
		flipped := append([]byte(nil), b[:n]...)
		flipped[bit/8] ^= 1 << (bit % 8)
		if r2, _, err := DecodeVersionRecord(flipped, version); err == nil {
			t.Fatalf("bit %d flip undetected: %+v", bit, r2)
		}
	})
}

// FuzzRecovery: arbitrary bytes as the contents of the active segment after
// a valid header, or bit flips applied to a valid multi-segment log. Open
// never panics and never invents a record: every record it returns is a
// byte-exact record of the input, offsets are contiguous, no marked batch
// cut short is left at the tail, and otherwise it returns a typed error.
// The seeds in testdata/fuzz/FuzzRecovery include a marked batch torn at
// every byte (TestRecoverySeeds).
func FuzzRecovery(f *testing.F) {
	var valid []byte
	for i := range 5 {
		valid = AppendRecord(valid, uint64(i), int64(i), payload(i, 10*i))
	}
	f.Add(valid, false, []byte{})
	f.Add(valid[:len(valid)-7], false, []byte{})
	f.Add(append(append([]byte(nil), valid...), 0, 0, 1), true, []byte{})
	f.Add(flip(valid, 40), true, []byte{})
	f.Add([]byte{}, false, []byte{0, 0, 40, 1})
	f.Add([]byte{}, true, []byte{2, 1, 200, 7, 1, 0, 33, 0x80})
	f.Fuzz(func(t *testing.T, contents []byte, repair bool, mutations []byte) {
		if len(contents) > 1<<16 {
			return
		}
		dir := t.TempDir()
		cfg := Config{SegmentBytes: 4096, IndexSpacingBytes: 256, RepairChecksumTail: repair,
			FS: &faultFS{noSync: true}}
		var inputs [][]byte
		if len(mutations) == 0 {
			inputs = [][]byte{writeActive(t, dir, contents)}
		} else {
			inputs = mutatedLog(t, dir, cfg, mutations)
		}
		l, err := Open(dir, cfg)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		defer l.Close()
		checkNoInvention(t, l, inputs)
	})
}

// writeActive writes one segment: a valid header for base 0, then contents.
func writeActive(t *testing.T, dir string, contents []byte) []byte {
	b := AppendSegmentHeader(nil, SegmentHeader{})
	b = append(b, contents...)
	if err := os.WriteFile(logPath(dir, 0), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// mutatedLog writes a valid log of several segments, then applies the
// mutations, read as (file index, position hi, position lo, xor) quads.
func mutatedLog(t *testing.T, dir string, cfg Config, m []byte) [][]byte {
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := l.Append([][]byte{payload(i, 50+i*3)}, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var inputs [][]byte
	for _, p := range files {
		b, _ := os.ReadFile(p)
		inputs = append(inputs, b)
	}
	for ; len(m) >= 4; m = m[4:] {
		i := int(m[0]) % len(files)
		b, _ := os.ReadFile(files[i])
		if len(b) == 0 {
			continue
		}
		b[(int(m[1])<<8|int(m[2]))%len(b)] ^= m[3]
		if err := os.WriteFile(files[i], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return inputs
}

func checkNoInvention(t *testing.T, l *Log, inputs [][]byte) {
	r, err := l.NewReader(l.First())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := l.First()
	var left uint32 // records still expected of the marked batch read last
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("untyped read error: %v", err)
			}
			return // cold data is verified lazily on read
		}
		if rec.Offset != want {
			t.Fatalf("offset %d, want %d", rec.Offset, want)
		}
		switch rec.Mark.Kind {
		case MarkOpens:
			left = max(rec.Mark.Len, 1) - 1
		case MarkContinues:
			left = max(left, 1) - 1
		default:
			left = 0
		}
		enc := AppendFullRecord(nil, rec)
		found := false
		for _, in := range inputs {
			found = found || bytes.Contains(in, enc)
		}
		if !found {
			t.Fatalf("record %d was not in the input", rec.Offset)
		}
		want++
	}
	if want != l.Next() {
		t.Fatalf("read up to %d, Next is %d", want, l.Next())
	}
	if left > 0 {
		t.Fatalf("a marked batch %d records short survived at the tail", left)
	}
}
