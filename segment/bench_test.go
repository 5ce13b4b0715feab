package segment

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// benchFull scales the benchmarks up (FELIX_BENCH_FULL=1); by default they
// are sized so that `go test -bench=. -benchtime=1x` stays fast.
var benchFull = os.Getenv("FELIX_BENCH_FULL") == "1"

type benchMode struct {
	name string
	fd   bool
}

var benchModes = []benchMode{{"mapped", false}, {"fd", true}}

func benchAppend(b *testing.B, mode benchMode, size, batch int, sync bool) {
	l, err := Open(b.TempDir(), Config{SegmentBytes: 64 << 20, WriteMode: writeMode(mode.fd)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payloads := make([][]byte, batch)
	for i := range payloads {
		payloads[i] = payload(i, size)
	}
	b.SetBytes(int64(size * batch))
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := l.Append(payloads, 1); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "records/s")
	if sync {
		h := l.Stats().SyncDuration
		b.ReportMetric(float64(h.Quantile(0.5).Microseconds()), "sync-p50-µs")
		b.ReportMetric(float64(h.Quantile(0.99).Microseconds()), "sync-p99-µs")
	}
}

// BenchmarkAppend: appends without any sync (page-cache speed).
func BenchmarkAppend(b *testing.B) {
	for _, m := range benchModes {
		for _, size := range []int{128, 4096} {
			for _, batch := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/%dB/batch%d", m.name, size, batch), func(b *testing.B) {
					benchAppend(b, m, size, batch, false)
				})
			}
		}
	}
}

// BenchmarkAppendSync: every append followed by Sync, the on_commit
// worst case with no group commit: mapped (msync MS_SYNC of the dirty
// range) against fd (pwrite + fdatasync).
func BenchmarkAppendSync(b *testing.B) {
	for _, m := range benchModes {
		for _, size := range []int{128, 4096} {
			for _, batch := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/%dB/batch%d", m.name, size, batch), func(b *testing.B) {
					benchAppend(b, m, size, batch, true)
				})
			}
		}
	}
}

// BenchmarkRecoveryScan: Open of a log whose active segment holds volume
// bytes of 4 KiB records (full), or 1 MiB of records in a segment of that
// size (sparse: the cost of proving the preallocated rest is zeros). The
// page cache is warm: this is the CPU cost of verification, not the disk.
func BenchmarkRecoveryScan(b *testing.B) {
	volume := int64(32 << 20)
	if benchFull {
		volume = 256 << 20
	}
	for _, shape := range []string{"full", "sparse"} {
		b.Run(shape, func(b *testing.B) {
			dir := b.TempDir()
			cfg := Config{SegmentBytes: volume + 1<<20}
			l, err := Open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			data := volume
			if shape == "sparse" {
				data = 1 << 20
			}
			rec := payload(1, 4096)
			for n := int64(0); n+4096+RecordHeaderBytes <= data; n += 4096 + RecordHeaderBytes {
				if _, err := l.Append([][]byte{rec}, 1); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
			l.Close()
			b.SetBytes(cfg.SegmentBytes)
			b.ResetTimer()
			var scanned time.Duration
			for b.Loop() {
				l, err := Open(dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				scanned += l.Stats().Recovery.Duration
				l.Close()
			}
			perGiB := scanned.Seconds() / float64(b.N) / (float64(cfg.SegmentBytes) / (1 << 30))
			b.ReportMetric(perGiB, "s/GiB")
		})
	}
}

// BenchmarkBatches: the walk a broker does to rebuild its producer table
// when a shard opens, over a log of marked batches of 64 records (256 B
// and 4 KiB payloads), in several segments; reported per GiB of log and
// per million records.
func BenchmarkBatches(b *testing.B) {
	volume := int64(64 << 20)
	if benchFull {
		volume = 1 << 30
	}
	for _, size := range []int{256, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			l, err := Open(b.TempDir(), Config{SegmentBytes: 128 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := make([][]byte, 64)
			for i := range batch {
				batch[i] = payload(i, size)
			}
			per := int64(64*(RecordHeaderBytes+size) + TagBytes)
			for n, seq := int64(0), uint64(0); n+per <= volume; n, seq = n+per, seq+1 {
				if _, err := l.AppendMarked(batch, 1, &BatchMark{ProducerID: seq % 100, Sequence: seq / 100}); err != nil {
					b.Fatal(err)
				}
			}
			records := l.Next()
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				if err := l.Batches(0, func(MarkedBatch) bool { return true }); err != nil {
					b.Fatal(err)
				}
			}
			each := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric(each/(float64(volume)/(1<<30)), "s/GiB")
			b.ReportMetric(each/(float64(records)/1e6), "s/Mrecords")
		})
	}
}

// BenchmarkRead: sequential replay through a Reader (zero-copy slices).
func BenchmarkRead(b *testing.B) {
	l, err := Open(b.TempDir(), Config{SegmentBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const n = 10000
	for i := range n {
		if _, err := l.Append([][]byte{payload(i, 128)}, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(128)
	b.ResetTimer()
	var off uint64
	for b.Loop() {
		if off == n {
			off = 0
		}
		next, err := l.Read(off, 1, func(uint64, int64, []byte) bool { return true })
		if err != nil {
			b.Fatal(err)
		}
		off = next
	}
}

// BenchmarkStageRecords: encoding a batch of records into a reused staging
// buffer, as fd mode does before its one write (CPU only, no I/O).
func BenchmarkStageRecords(b *testing.B) {
	for _, size := range []int{256, 4096} {
		b.Run(fmt.Sprintf("%dB/batch64", size), func(b *testing.B) {
			p := payload(1, size)
			var stage []byte
			b.SetBytes(int64(64 * size))
			for b.Loop() {
				stage = stage[:0]
				for i := range 64 {
					stage = AppendRecord(stage, uint64(i), 1, p)
				}
			}
		})
	}
}
