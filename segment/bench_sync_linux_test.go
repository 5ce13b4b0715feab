//go:build linux

package segment

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/linux"
)

// BenchmarkSyncUnderLoad: a 128 B append + Sync (pwrite + fdatasync) in a
// loop, from a thread left to the scheduler or pinned to each CPU in turn,
// with nothing else running, with a goroutine that sleeps three times 20 µs
// during each sync, or with one that spins 180 µs during it. It exists
// because group commit's scaling rests on a sync costing the same under
// load as alone, and on the 2-vCPU VM of docs/BENCHMARKS.md it does not:
// either sibling made the kernel's fdatasync about twice as slow, and a
// thread on the CPU that does not take the disk's completion interrupt
// (/proc/interrupts) was slower again. Run it on a new host before reading
// the on_commit concurrency ratios there.
func BenchmarkSyncUnderLoad(b *testing.B) {
	cpus, err := linux.SchedGetaffinity()
	if err != nil {
		b.Skip(err)
	}
	for _, cpu := range append([]int{-1}, cpus...) {
		where := "cpu=any"
		if cpu >= 0 {
			where = fmt.Sprintf("cpu=%d", cpu)
		}
		for _, sib := range []string{"none", "sleeper", "spinner"} {
			b.Run(where+"/sibling="+sib, func(b *testing.B) {
				benchSync(b, syncCase{cpu: cpu, sibling: sib, size: 128})
			})
		}
	}
}

// BenchmarkSyncExtents: the same loop, unpinned and alone, with 128 B or
// 5,000 B (a group commit of ~40 such records) per sync, into the
// preallocated segment as the log makes it (fallocate: unwritten extents)
// or into one whose blocks were first written with zeros. A sync that
// reaches a block not yet written also converts its extent, which ext4
// without a journal writes synchronously inside the fdatasync: measured
// ~2x the sync on the VM of docs/BENCHMARKS.md ("A sync on this VM").
func BenchmarkSyncExtents(b *testing.B) {
	for _, size := range []int{128, 5000} {
		for _, zeroed := range []bool{false, true} {
			ext := "fallocated"
			if zeroed {
				ext = "zeroed"
			}
			b.Run(fmt.Sprintf("bytes=%d/extents=%s", size, ext), func(b *testing.B) {
				benchSync(b, syncCase{cpu: -1, sibling: "none", size: size, zeroed: zeroed})
			})
		}
	}
}

type syncCase struct {
	cpu     int    // pin the thread to this CPU; -1: unpinned
	sibling string // none, sleeper, spinner
	size    int    // bytes appended per sync
	zeroed  bool   // write zeros over the segment before the loop
}

func benchSync(b *testing.B, c syncCase) {
	const segBytes = 64 << 20
	l, err := Open(b.TempDir(), Config{SegmentBytes: segBytes, WriteMode: WriteModeFD})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if c.zeroed {
		zeroSegment(b, l.mu.segs[0], segBytes)
	}
	cpu, sibling := c.cpu, c.sibling
	if cpu >= 0 {
		// Never unlocked: the goroutine ends locked, so Go discards the
		// thread and its mask instead of reusing it.
		runtime.LockOSThread()
		if err := linux.SchedSetaffinity([]int{cpu}); err != nil {
			b.Skip(err)
		}
	}
	p := [][]byte{payload(0, c.size-RecordHeaderBytes)}
	var sum time.Duration
	n := 0
	for b.Loop() {
		if _, err := l.Append(p, 1); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		switch sibling {
		case "sleeper": // woken by timers while the sync runs
			wg.Go(func() {
				for range 3 {
					time.Sleep(20 * time.Microsecond)
				}
			})
		case "spinner": // keeps a CPU busy while the sync runs
			wg.Go(func() {
				for end := time.Now().Add(180 * time.Microsecond); time.Now().Before(end); {
				}
			})
		}
		t := time.Now()
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
		sum += time.Since(t)
		n++
		wg.Wait()
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(n), "sync-mean-µs")
}

// zeroSegment writes zeros over everything after the segment header and
// syncs them, turning the preallocated extents into written ones.
func zeroSegment(b *testing.B, s *segment, size int64) {
	zeros := make([]byte, 1<<20)
	for off := int64(SegmentHeaderBytes); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := s.file.WriteAt(zeros[:n], off); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.file.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPageCacheWrite: the CPU that a log's bytes cost in the kernel,
// apart from the log: 256 KiB pwrites into new fallocated 1 GiB files,
// kept to the end (a page of the page cache allocated for each 4 KiB), or
// over the cached pages of one file written before. On the VM of
// docs/BENCHMARKS.md a new page costs about ten times more once the pages
// the guest freed lately are used up: run it for several GiB
// (16384x is 4 GiB) to see that. Each replica of a replicated shard pays
// it for every byte ("Replication").
func BenchmarkPageCacheWrite(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := "pages=new"
		if cached {
			name = "pages=cached"
		}
		b.Run(name, func(b *testing.B) { benchPageCacheWrite(b, cached) })
	}
}

func benchPageCacheWrite(b *testing.B, cached bool) {
	const chunk, fileBytes = 256 << 10, 1 << 30
	buf := payload(1, chunk)
	dir := b.TempDir()
	var f *os.File
	// fresh starts a new file; the last one stays, and so do its pages.
	fresh := func() {
		if f != nil {
			f.Close()
		}
		var err error
		if f, err = os.CreateTemp(dir, "pages"); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, fileBytes); err != nil {
			b.Skip(err)
		}
		for off := int64(0); cached && off < fileBytes; off += chunk {
			if _, err := f.WriteAt(buf, off); err != nil {
				b.Fatal(err)
			}
		}
	}
	fresh()
	defer func() { f.Close() }()
	var cpu time.Duration
	off := int64(0)
	b.SetBytes(chunk)
	b.ResetTimer()
	start := processCPU()
	for range b.N {
		if off == fileBytes {
			off = 0
			if !cached {
				cpu += processCPU() - start
				b.StopTimer()
				fresh()
				b.StartTimer()
				start = processCPU()
			}
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off += chunk
	}
	cpu += processCPU() - start
	b.ReportMetric(cpu.Seconds()/(float64(b.N)*chunk/1e9), "cpu-s/GB")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
