package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// BenchmarkDurableCachePut: writers goroutines, each on its own QUIC
// connection with its own cache handle (conns=8) or all pipelined by
// request id on one connection's handle (pipelined), do sequential
// acknowledged 64 B
// puts (one in flight each, distinct keys) to a durable on_commit cache for
// a fixed time (durableCaseTime: FELIX_BENCH_FULL or FELIX_BENCH_CASE_TIME),
// over real QUIC on loopback. An ack means the put's record was covered by
// an fdatasync, so the rate at 1 writer is about one sync per put; the
// issue's done-when is that 8 writers reach at least 5x that rate, which
// needs their puts to share syncs (waiters/sync, read from the broker's
// /metrics like an operator would). puts/s, p50_us and p99_us are the
// client-side put latencies.
func BenchmarkDurableCachePut(b *testing.B) {
	b.Run("writers=1", func(b *testing.B) { benchCachePut(b, 1, false) })
	b.Run("writers=8/conns=8", func(b *testing.B) { benchCachePut(b, 8, false) })
	b.Run("writers=8/pipelined", func(b *testing.B) { benchCachePut(b, 8, true) })
}

// benchCachePut runs writers goroutines, each with its own connection, or
// all pipelined on one connection's cache handle when shared.
func benchCachePut(b *testing.B, writers int, shared bool) {
	spec := broker.CacheSpec{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: "bench"},
		Durable: true, Fsync: benchCacheFsync()}
	h := startCacheBroker(b, broker.Config{DataDir: filepath.Join(b.TempDir(), "data")}, spec)
	ctx := benchCtx(b)
	value := make([]byte, 64)
	lat := make([][]time.Duration, writers)
	var failed atomic.Value
	var wg sync.WaitGroup
	handles := make([]*client.Cache, writers)
	for w := range handles {
		if shared && w > 0 {
			handles[w] = handles[0]
			continue
		}
		handles[w] = openCache(b, h, "bench")
		require.NoError(b, handles[w].Put(ctx, "warm", value, 0)) // connection and log warm
	}
	m0 := storageMetrics(b, h.b)
	d := durableCaseTime(b)
	b.ResetTimer()
	start := time.Now()
	deadline := start.Add(d)
	for w, k := range handles {
		wg.Go(func() {
			for i := 0; ; i++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				if err := k.Put(ctx, fmt.Sprintf("w%d-%d", w, i%4096), value, 0); err != nil {
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
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	m := storageMetrics(b, h.b).sub(m0)
	all := slices.Concat(lat...)
	slices.Sort(all)
	require.NotEmpty(b, all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "puts/s")
	b.ReportMetric(micros(percentile(all, 0.50)), "p50_us")
	b.ReportMetric(micros(percentile(all, 0.99)), "p99_us")
	b.ReportMetric(m.waitersSum/max(m.waitersCount, 1), "waiters/sync")
	b.ReportMetric(m.syncLatencySum/max(m.syncLatencyCount, 1)*1e6, "sync_us")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(len(all)), "ns/op")
}

// benchCacheFsync is on_commit unless FELIX_BENCH_CACHE_FSYNC names another
// mode (never measures the request path without the disk).
func benchCacheFsync() string {
	if m := os.Getenv("FELIX_BENCH_CACHE_FSYNC"); m != "" {
		return m
	}
	return "on_commit"
}
