package broker_test

// Durable storage benchmarks. Three layers, bottom up:
//
//   - BenchmarkRawFdatasync4K: the device flush itself (pwrite 4 KiB +
//     fdatasync, sequential), the floor of every on_commit ack.
//   - BenchmarkDurableAppend: one segment.Log joined to one
//     commit.Sequencer exactly as broker/durable.go joins them (Append and
//     Reserve under one mutex, the ack when done runs), driven by conc
//     goroutines; no network.
//   - BenchmarkDurableVsEphemeral and BenchmarkDurableAckLatency256B: the
//     whole broker over real QUIC on 127.0.0.1 (the harness of
//     harness_test.go), durable on_commit against ephemeral in one process.
//
// Every benchmark reports custom metrics with b.ReportMetric (ns/op is
// overridden with a meaningful per-record or per-message figure);
// scripts/bench-durable.sh runs each case as a fresh process several times
// and prints min/median/max.
//
// Sizing: the append and raw-sync cases run for a fixed time per b.N
// (durableCaseTime: 1.5 s under FELIX_BENCH_FULL, 20 ms otherwise, or
// FELIX_BENCH_CASE_TIME), so -benchtime=1x is a short smoke run and the
// default -benchtime=1s settles on one long enough run. The end-to-end
// throughput cases move a fixed volume (512 MiB under FELIX_BENCH_FULL,
// 16 MiB at -benchtime=1x otherwise, with a WARNING). The ack-latency case
// is b.N sequential publishes after a warm-up.

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/linux"
	"github.com/felixmq/felix/segment"
)

const (
	durableFullCase  = 1500 * time.Millisecond // per b.N under FELIX_BENCH_FULL
	durableSmokeCase = 20 * time.Millisecond   // per b.N otherwise
	durableMsgSize   = 4 << 10                 // end-to-end throughput payload
	durableBatch     = 16                      // payloads per acked publish
	durableWindow    = 64                      // acked publishes in flight per publisher
	durableFullVol   = 512 << 20               // bytes per end-to-end throughput run
	durableSmokeVol  = 16 << 20                // at -benchtime=1x without FELIX_BENCH_FULL
	rawSyncFileBytes = 256 << 20               // preallocated like a default segment
)

func durableBenchFull() bool { return os.Getenv("FELIX_BENCH_FULL") != "" }

// durableCaseTime is how long a time-sized case runs: a fixed slice per b.N.
func durableCaseTime(b *testing.B) time.Duration {
	per := durableSmokeCase
	if durableBenchFull() {
		per = durableFullCase
	}
	if s := os.Getenv("FELIX_BENCH_CASE_TIME"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(b, err, "FELIX_BENCH_CASE_TIME")
		per = d
	}
	return per * time.Duration(b.N)
}

// BenchmarkDurableAppend: conc goroutines each append a batch of batch
// records of size bytes to one segment log (default config: 256 MiB
// preallocated segments, WriteModeFD: pwrite + fdatasync) and reserve it
// with a commit sequencer in mode, under one mutex as broker/durable.go
// does, then wait for done before appending again. Latency is per batch,
// from before taking the lock to done. waiters/sync and records/sync are
// the means of commit.Stats WaitersPerSync and RecordsPerSync (waiters are
// 0 by definition in never and periodic modes, which never wait).
func BenchmarkDurableAppend(b *testing.B) {
	for _, mode := range []commit.Mode{commit.Never, commit.Periodic, commit.OnCommit} {
		for _, size := range []int{128, 4096} {
			for _, conc := range []int{1, 8, 64} {
				for _, batch := range []int{1, 16} {
					b.Run(fmt.Sprintf("mode=%s/size=%d/conc=%d/batch=%d", mode, size, conc, batch), func(b *testing.B) {
						benchDurableAppend(b, mode, size, conc, batch)
					})
				}
			}
		}
	}
}

func benchDurableAppend(b *testing.B, mode commit.Mode, size, conc, batch int) {
	log, err := segment.Open(filepath.Join(b.TempDir(), "log"), segment.Config{})
	require.NoError(b, err)
	defer log.Close()
	seq, err := commit.New(commit.Config{Mode: mode, Syncer: log})
	require.NoError(b, err)
	defer seq.Close()
	payloads := benchPayloads(batch, size) // read-only: Append copies
	var (
		mu     sync.Mutex // the shard lock of broker/durable.go
		failed atomic.Value
		wg     sync.WaitGroup
	)
	lat := make([][]time.Duration, conc)
	d := durableCaseTime(b)
	b.ResetTimer()
	start := time.Now()
	deadline := start.Add(d)
	for w := range conc {
		wg.Go(func() {
			ch := make(chan error, 1)
			done := func(err error) { ch <- err }
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				mu.Lock()
				base, err := log.Append(payloads, t0.UnixMicro())
				if err == nil {
					err = seq.Reserve(base, base+uint64(len(payloads)), done)
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
	st, ls := seq.Stats(), log.Stats() // before Close's final sync, which has no waiters
	require.NoError(b, seq.Close())
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	records := len(all) * batch
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(records*size)/elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(micros(percentile(all, 0.50)), "p50_us")
	b.ReportMetric(micros(percentile(all, 0.99)), "p99_us")
	b.ReportMetric(micros(percentile(all, 0.999)), "p999_us")
	b.ReportMetric(st.WaitersPerSync.Mean(), "waiters/sync")
	b.ReportMetric(st.RecordsPerSync.Mean(), "records/sync")
	b.ReportMetric(float64(st.Syncs), "syncs")
	b.ReportMetric(st.SyncLatency.Mean()/1e3, "sync_us")
	b.ReportMetric(float64(ls.Rolls), "rolls")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(records), "ns/op")
}

// rawSyncFile is a file written 4 KiB at a time with pwrite, each write
// followed by fdatasync (the raw calls, through internal/linux), the way a
// WriteModeFD segment writes and syncs.
type rawSyncFile struct {
	f     *os.File
	off   int64
	limit int64 // 0: no limit (the file grows)
	wrap  bool  // overwrite: cycle inside [0, limit)
	buf   []byte
}

// openRawSyncFile creates dir/name as one of:
//   - append: empty; every write extends the file, so fdatasync also
//     commits the new size (a journal commit on ext4);
//   - preallocated: fallocate(2) mode 0 to 256 MiB first, as a segment is;
//     every write lands in an unwritten extent, whose conversion fdatasync
//     commits (a journal commit on ext4);
//   - overwrite: 16 MiB written and fsynced first, then rewritten in a
//     cycle: fdatasync flushes data only, no metadata.
func openRawSyncFile(b *testing.B, dir, kind string) *rawSyncFile {
	f, err := os.OpenFile(filepath.Join(dir, "raw-"+kind), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	require.NoError(b, err)
	b.Cleanup(func() { f.Close() })
	r := &rawSyncFile{f: f, buf: make([]byte, 4096)}
	for i := range r.buf {
		r.buf[i] = byte(i*7 + 1)
	}
	switch kind {
	case "append":
	case "preallocated":
		r.limit = rawSyncFileBytes
		if err := linux.Fallocate(f.Fd(), 0, 0, r.limit); err != nil {
			b.Logf("fallocate: %v; using a sparse file", err)
			require.NoError(b, f.Truncate(r.limit))
		}
	case "overwrite":
		r.limit, r.wrap = 16<<20, true
		chunk := make([]byte, 1<<20)
		for off := int64(0); off < r.limit; off += int64(len(chunk)) {
			_, err := f.WriteAt(chunk, off)
			require.NoError(b, err)
		}
		require.NoError(b, f.Sync())
	default:
		b.Fatalf("unknown raw file kind %q", kind)
	}
	return r
}

// syncOne writes the next 4 KiB and fdatasyncs; it returns the duration of
// both, and false when a preallocated file is full.
func (r *rawSyncFile) syncOne(b *testing.B) (time.Duration, bool) {
	if r.limit > 0 && r.off+int64(len(r.buf)) > r.limit {
		if !r.wrap {
			return 0, false
		}
		r.off = 0
	}
	t0 := time.Now()
	_, err := r.f.WriteAt(r.buf, r.off)
	require.NoError(b, err)
	err = linux.Fdatasync(r.f.Fd())
	if err != nil {
		require.ErrorIs(b, err, linux.ErrNotSupported)
		require.NoError(b, r.f.Sync())
	}
	r.off += int64(len(r.buf))
	return time.Since(t0), true
}

// BenchmarkRawFdatasync4K: sequential pwrite of 4 KiB + fdatasync on this
// file system, on a file that grows (append), a preallocated one (as a
// segment is: file=preallocated is the cost an on_commit ack pays at
// least once) and already-written blocks (overwrite: data-only flush).
func BenchmarkRawFdatasync4K(b *testing.B) {
	for _, kind := range []string{"append", "preallocated", "overwrite"} {
		b.Run("file="+kind, func(b *testing.B) {
			r := openRawSyncFile(b, b.TempDir(), kind)
			d := durableCaseTime(b)
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			for time.Since(start) < d {
				l, ok := r.syncOne(b)
				if !ok {
					break
				}
				lat = append(lat, l)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "syncs/s")
			b.ReportMetric(float64(len(lat)*4096)/elapsed.Seconds()/1e6, "MB/s")
			b.ReportMetric(micros(percentile(lat, 0.50)), "p50_us")
			b.ReportMetric(micros(percentile(lat, 0.99)), "p99_us")
			b.ReportMetric(micros(percentile(lat, 0.999)), "p999_us")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(max(len(lat), 1)), "ns/op")
		})
	}
}

// durableVolume is the fixed volume of an end-to-end throughput run, in
// bytes, rounded down to whole batches of every publisher.
func durableVolume(b *testing.B, pubs int) int {
	vol := durableFullVol
	if b.N == 1 && !durableBenchFull() {
		vol = durableSmokeVol
	}
	if vol < 2*benchQUICConn {
		b.Logf("WARNING: volume %d MiB is below 2× the QUIC connection window (%d MiB): "+
			"the result is dominated by buffering, not throughput (set FELIX_BENCH_FULL=1)", vol>>20, benchQUICConn>>20)
	}
	chunk := durableMsgSize * durableBatch * pubs
	return vol / chunk * chunk
}

func benchStreamSpec(durable bool) broker.StreamSpec {
	spec := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "bench"}, Shards: 1}
	if durable {
		spec.Durable, spec.Fsync = true, "on_commit"
	}
	return spec
}

// BenchmarkDurableVsEphemeral: publishers publishers, each on its own
// connection, pipeline acked publishes of 16 × 4 KiB (64 in flight each)
// into one single-shard stream, ephemeral or durable on_commit; one
// subscriber on its own connection drains it (Block policy: lossless).
// Throughput batching profile; AdmitTimeout 1 min. MB/s is payload bytes delivered / (last
// delivery − first publish), MB = 10^6 bytes; ack_MB/s counts until the
// last ack. For the durable stream it also reports the broker's group
// commit (waiters/sync, records/sync, sync_us, syncs) and the rate the log
// took bytes at (disk_MB/s, record headers included). iowait_pct is the
// machine's iowait share of CPU time during the run (/proc/stat);
// machine_cores the CPUs busy machine-wide, other_cores those outside this
// process (kernel writeback, journal, softirq, anything else running).
func BenchmarkDurableVsEphemeral(b *testing.B) {
	for _, pubs := range []int{1, 8, 16} {
		for _, stream := range []string{"ephemeral", "durable_on_commit"} {
			b.Run(fmt.Sprintf("publishers=%d/stream=%s", pubs, stream), func(b *testing.B) {
				benchDurableVsEphemeral(b, pubs, stream == "durable_on_commit")
			})
		}
	}
}

func benchDurableVsEphemeral(b *testing.B, pubs int, durable bool) {
	vol := durableVolume(b, pubs)
	msgs := vol / durableMsgSize
	// AdmitTimeout: up to publishers × 64 × 16 messages wait for room in
	// the one subscriber's queue; the default 2 s refuses some of them at
	// 16 publishers, and this run measures lossless saturation.
	h := serveBroker(b, broker.Config{DataDir: b.TempDir(), Queue: fanout.Config{Policy: fanout.Block},
		AdmitTimeout: time.Minute}, benchStreamSpec(durable))
	ctx := benchCtx(b)
	var clients []*client.Client
	dial := func() *client.Client {
		c := h.dial(b)
		clients = append(clients, c)
		return c
	}
	sub, err := dial().Subscribe(ctx, "default", "bench", client.SubscribeOptions{})
	require.NoError(b, err)
	rs := []*benchReader{{sub: sub, target: uint64(msgs), done: make(chan struct{})}}
	go rs[0].run(ctx)
	ps := make([]*client.Publisher, pubs)
	for i := range ps {
		ps[i], err = dial().NewPublisher(ctx, "default", "bench")
		require.NoError(b, err)
		require.True(b, ps[i].Binary())
	}
	payloads := benchPayloads(durableBatch, durableMsgSize)
	m0 := storageMetrics(b, h.b)
	b.ResetTimer()
	cpu0, io0, start := processCPU(), readCPUStat(), time.Now()
	errs := make(chan error, pubs)
	for _, p := range ps {
		go func() { errs <- publishWindowed(ctx, p, payloads, msgs/pubs, durableWindow) }()
	}
	for range ps {
		require.NoError(b, <-errs)
	}
	acked := time.Since(start)
	delivered, dropped, bytes, last := waitReaders(b, rs)
	cpu, io := processCPU()-cpu0, readCPUStat().sub(io0)
	b.StopTimer()
	m := storageMetrics(b, h.b).sub(m0)
	require.Equal(b, uint64(msgs), delivered, "Block is lossless: delivered == published")
	require.Zero(b, dropped)
	elapsed := last.Sub(start)
	reportRate(b, bytes, msgs, elapsed, cpu)
	b.ReportMetric(float64(bytes)/acked.Seconds()/1e6, "ack_MB/s")
	b.ReportMetric(io.iowaitPct(), "iowait_pct")
	if elapsed >= 500*time.Millisecond && cpu >= 0 {
		busy := io.busyCores(elapsed)
		b.ReportMetric(busy, "machine_cores")
		b.ReportMetric(busy-cpu.Seconds()/elapsed.Seconds(), "other_cores") // outside this process
		b.ReportMetric(100*float64(io.softirq)/float64(max(io.total, 1)), "softirq_pct")
	}
	var lost uint64
	for _, cs := range h.b.Stats().Connections {
		lost += cs.PacketsLost
	}
	for _, c := range clients {
		lost += c.Conn().ConnectionStats().PacketsLost
	}
	b.ReportMetric(float64(lost), "lost_pkts")
	if durable {
		m.report(b, elapsed)
	}
}

// BenchmarkDurableAckLatency256B: one publisher doing sequential acked
// 256 B publishes to an on_commit durable stream (no subscriber; latency
// batching profile), interleaved in four blocks with the same number of
// raw pwrite 4 KiB + fdatasync calls on a preallocated file in the same
// data directory, so ratio_p50 = ack p50 / raw p50 compares the two inside
// one run. b.N is the number of timed publishes (after 200 warm-up).
func BenchmarkDurableAckLatency256B(b *testing.B) {
	dir := b.TempDir()
	h := serveBroker(b, broker.Config{DataDir: filepath.Join(dir, "data"), Batch: benchLatencyProfile}, benchStreamSpec(true))
	ctx := benchCtx(b)
	pub, err := h.dial(b).NewPublisher(ctx, "default", "bench")
	require.NoError(b, err)
	payload := make([]byte, 256)
	raw := openRawSyncFile(b, dir, "preallocated")
	sequentialAcked(b, ctx, pub, payload, benchWarmup)
	for range benchWarmup / 10 {
		raw.syncOne(b)
	}
	m0 := storageMetrics(b, h.b)
	var ackLat, rawLat []time.Duration
	b.ResetTimer()
	const blocks = 4
	for i := range blocks {
		n := b.N*(i+1)/blocks - b.N*i/blocks
		for range n {
			l, ok := raw.syncOne(b)
			require.True(b, ok, "raw file full")
			rawLat = append(rawLat, l)
		}
		ackLat = append(ackLat, sequentialAcked(b, ctx, pub, payload, n)...)
	}
	b.StopTimer()
	m := storageMetrics(b, h.b).sub(m0)
	slices.Sort(ackLat)
	slices.Sort(rawLat)
	var sum time.Duration
	for _, l := range ackLat {
		sum += l
	}
	b.ReportMetric(micros(percentile(ackLat, 0.50)), "p50_us")
	b.ReportMetric(micros(percentile(ackLat, 0.99)), "p99_us")
	b.ReportMetric(micros(percentile(rawLat, 0.50)), "raw_p50_us")
	b.ReportMetric(micros(percentile(rawLat, 0.99)), "raw_p99_us")
	b.ReportMetric(float64(percentile(ackLat, 0.50))/float64(max(percentile(rawLat, 0.50), 1)), "ratio_p50")
	b.ReportMetric(m.syncLatencySum/max(m.syncLatencyCount, 1)*1e6, "sync_us")
	b.ReportMetric(m.syncs/float64(max(len(ackLat), 1)), "syncs/ack")
	b.ReportMetric(float64(sum.Nanoseconds())/float64(max(len(ackLat), 1)), "ns/op")
}

// durableMetrics is what the broker exports about its durable shards
// (broker/metrics_storage.go), read back from its /metrics endpoint: the
// benchmark sees the broker as an operator does.
type durableMetrics struct {
	syncs, waitersSum, waitersCount, recordsSum, recordsCount float64
	syncLatencySum, syncLatencyCount, bytes                   float64
}

func storageMetrics(b *testing.B, br *broker.Broker) durableMetrics {
	rec := httptest.NewRecorder()
	br.AdminHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(b, 200, rec.Code)
	var m durableMetrics
	fields := map[string]*float64{
		"felix_commit_syncs_total":                &m.syncs,
		"felix_commit_waiters_per_sync_sum":       &m.waitersSum,
		"felix_commit_waiters_per_sync_count":     &m.waitersCount,
		"felix_commit_records_per_sync_sum":       &m.recordsSum,
		"felix_commit_records_per_sync_count":     &m.recordsCount,
		"felix_commit_sync_latency_seconds_sum":   &m.syncLatencySum,
		"felix_commit_sync_latency_seconds_count": &m.syncLatencyCount,
		"felix_storage_bytes_total":               &m.bytes,
	}
	for line := range strings.Lines(rec.Body.String()) {
		name, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if p := fields[name]; ok && p != nil {
			v, err := strconv.ParseFloat(val, 64)
			require.NoError(b, err, line)
			*p = v
		}
	}
	return m
}

func (m durableMetrics) sub(o durableMetrics) durableMetrics {
	return durableMetrics{
		syncs: m.syncs - o.syncs, waitersSum: m.waitersSum - o.waitersSum, waitersCount: m.waitersCount - o.waitersCount,
		recordsSum: m.recordsSum - o.recordsSum, recordsCount: m.recordsCount - o.recordsCount,
		syncLatencySum: m.syncLatencySum - o.syncLatencySum, syncLatencyCount: m.syncLatencyCount - o.syncLatencyCount,
		bytes: m.bytes - o.bytes,
	}
}

func (m durableMetrics) report(b *testing.B, elapsed time.Duration) {
	b.ReportMetric(m.syncs, "syncs")
	b.ReportMetric(m.waitersSum/max(m.waitersCount, 1), "waiters/sync")
	b.ReportMetric(m.recordsSum/max(m.recordsCount, 1), "records/sync")
	b.ReportMetric(m.syncLatencySum/max(m.syncLatencyCount, 1)*1e6, "sync_us")
	b.ReportMetric(m.bytes/elapsed.Seconds()/1e6, "disk_MB/s")
}

// cpuStat is the machine-wide first line of /proc/stat, in clock ticks.
type cpuStat struct{ total, idle, iowait, softirq uint64 }

func readCPUStat() cpuStat {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	var s cpuStat
	for i := 1; i < len(f) && i <= 8; i++ { // user .. steal; guest is in user
		v, _ := strconv.ParseUint(f[i], 10, 64)
		s.total += v
		switch i {
		case 4:
			s.idle = v
		case 5:
			s.iowait = v
		case 7:
			s.softirq = v
		}
	}
	return s
}

func (s cpuStat) sub(o cpuStat) cpuStat {
	return cpuStat{s.total - o.total, s.idle - o.idle, s.iowait - o.iowait, s.softirq - o.softirq}
}

// busyCores is the machine's CPUs busy (not idle, not in iowait) over
// elapsed, at 100 ticks per second: with the process's own cpu_cores it
// shows what the kernel's threads (writeback, jbd2, softirq) took.
func (s cpuStat) busyCores(elapsed time.Duration) float64 {
	return float64(s.total-s.idle-s.iowait) / 100 / elapsed.Seconds()
}

func (s cpuStat) iowaitPct() float64 {
	if s.total == 0 {
		return 0
	}
	return 100 * float64(s.iowait) / float64(s.total)
}
