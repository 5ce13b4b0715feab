package commit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fileLog is the benchmark's log: a real file that each reservation appends
// 128 bytes per record to, synced with a real fdatasync.
type fileLog struct {
	f      *os.File
	rec    []byte
	noSync bool // page cache only: the CPU ceiling of the same loop
}

func newFileLog(b *testing.B) *fileLog {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return &fileLog{f: f, rec: make([]byte, 128)}
}

func (l *fileLog) Sync() error {
	if l.noSync {
		return nil
	}
	return fdatasync(l.f)
}

// BenchmarkOnCommit measures group commit over a real fdatasync: each
// writer appends one 128-byte record under a shared append lock, reserves
// it, and waits for done. Reported: records/s, p50/p99 latency from append
// to done, and mean waiters per sync. The broker's goal is ≥40× the
// records/s of concurrency=1 at concurrency=64 with ≥8 waiters per sync.
func BenchmarkOnCommit(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			benchOnCommit(b, conc, 0, false)
		})
	}
}

// BenchmarkOnCommitPageCache runs the same loop with a Sync that does
// nothing: the ceiling set by CPU, the append lock and the callbacks, which
// durable throughput should approach (docs/design.md, "Storage").
func BenchmarkOnCommitPageCache(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			benchOnCommit(b, conc, 0, true)
		})
	}
}

// BenchmarkOnCommitMaxDelay is BenchmarkOnCommit with the coalescing wait
// on, to show whether Config.MaxDelay earns its latency.
func BenchmarkOnCommitMaxDelay(b *testing.B) {
	for _, delay := range []time.Duration{100 * time.Microsecond, 500 * time.Microsecond} {
		for _, conc := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("delay=%v/concurrency=%d", delay, conc), func(b *testing.B) {
				benchOnCommit(b, conc, delay, false)
			})
		}
	}
}

func benchOnCommit(b *testing.B, conc int, delay time.Duration, noSync bool) {
	log := newFileLog(b)
	log.noSync = noSync
	s, err := New(Config{Mode: OnCommit, Syncer: log, MaxDelay: delay})
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu      sync.Mutex // the log's append lock
		offset  uint64
		claimed atomic.Int64
		failed  atomic.Value
		wg      sync.WaitGroup
	)
	lat := make([][]time.Duration, conc)
	b.ResetTimer()
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			ch := make(chan error, 1)
			done := func(err error) { ch <- err }
			lat[w] = make([]time.Duration, 0, b.N/conc+1)
			for claimed.Add(1) <= int64(b.N) {
				t0 := time.Now()
				mu.Lock()
				_, err := log.f.Write(log.rec)
				if err == nil {
					err = s.Reserve(offset, offset+1, done)
					offset++
				}
				mu.Unlock()
				if err == nil {
					err = <-ch
				}
				if err != nil {
					failed.Store(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	st := s.Stats() // before Close's final sync, which has no waiters
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[(len(all)*99)/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(st.WaitersPerSync.Sum)/float64(max(st.WaitersPerSync.Count, 1)), "waiters/sync")
	b.ReportMetric(float64(st.SyncLatency.Sum)/float64(max(st.SyncLatency.Count, 1))/1e3, "sync-µs")
}
