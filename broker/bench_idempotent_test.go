package broker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// BenchmarkIdempotentCost measures what exactly-once costs: acked
// throughput (batches of 64, 64 in flight) and single-publish ack latency
// through client.IdempotentPublisher against client.Publisher, on one
// broker, in alternating phases of one run (which side goes first swaps
// each pair), on an ephemeral and an on_commit durable stream. It reports
// each side and the ratio idempotent / plain. FELIX_BENCH_CASE_TIME sets
// a case's length (FELIX_BENCH_FULL=1: 1.5 s per b.N).
func BenchmarkIdempotentCost(b *testing.B) {
	for _, fsync := range []string{"ephemeral", "on_commit"} {
		for _, size := range []int{4096, 256} {
			b.Run(fmt.Sprintf("%s/throughput/%dBx64", fsync, size), func(b *testing.B) { benchIdemThroughput(b, fsync, size) })
		}
		b.Run(fsync+"/latency/256Bx1", func(b *testing.B) { benchIdemLatency(b, fsync) })
	}
}

// idemBench is a broker with the stream "cost" and a plain and an
// idempotent publisher to it, each on its own connection.
type idemBench struct {
	plain *client.Publisher
	idem  *client.IdempotentPublisher
}

func newIdemBench(b *testing.B, ctx context.Context, fsync string) *idemBench {
	bb := startBenchBroker(b, broker.Config{DataDir: filepath.Join(b.TempDir(), "data")})
	spec := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "cost"}, Shards: 1}
	if fsync != "ephemeral" {
		spec.Durable, spec.Fsync = true, fsync
	}
	require.NoError(b, bb.b.CreateStream(spec))
	plain, err := bb.dial(b, client.Config{}).NewPublisher(ctx, "default", "cost")
	require.NoError(b, err)
	idem, err := bb.dial(b, client.Config{}).NewIdempotentPublisher(ctx, "default", "cost", client.IdempotentOptions{})
	require.NoError(b, err)
	return &idemBench{plain: plain, idem: idem}
}

// phases runs side(false) (plain) and side(true) (idempotent) alternately
// in phases of at most phase, for the case's time, swapping which goes
// first each pair: short phases, many pairs, so that both sides meet the
// same interference on a shared machine.
func phases(b *testing.B, phase time.Duration, side func(idem bool, until time.Time)) {
	total := durableCaseTime(b)
	phase = min(phase, total/4)
	b.ResetTimer()
	for pair, end := 0, time.Now().Add(total); time.Now().Before(end); pair++ {
		first := pair%2 == 1
		side(first, time.Now().Add(phase))
		side(!first, time.Now().Add(phase))
	}
	b.StopTimer()
}

func benchIdemThroughput(b *testing.B, fsync string, size int) {
	ctx := benchCtx(b)
	ib := newIdemBench(b, ctx, fsync)
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = make([]byte, size)
	}
	var done [2]int
	var took [2]time.Duration
	phases(b, 500*time.Millisecond, func(idem bool, until time.Time) {
		side := map[bool]int{false: 0, true: 1}[idem]
		start := time.Now()
		done[side] += ib.pipeline(b, ctx, idem, batch, until)
		took[side] += time.Since(start)
	})
	rate := func(i int) float64 { return float64(done[i]) / took[i].Seconds() }
	b.ReportMetric(rate(0)*64*float64(size)/1e6, "MB/s_plain")
	b.ReportMetric(rate(1)*64*float64(size)/1e6, "MB/s_idem")
	b.ReportMetric(rate(1)/rate(0), "idem/plain")
}

// pipeline publishes batch with 64 in flight until the deadline, then waits
// for the rest, and returns how many batches were acked.
func (ib *idemBench) pipeline(b *testing.B, ctx context.Context, idem bool, batch [][]byte, until time.Time) int {
	window := make(chan *client.PendingAck, 64)
	var wg sync.WaitGroup
	n := 0
	wg.Go(func() {
		for pa := range window {
			require.NoError(b, pa.Wait(ctx))
			n++
		}
	})
	for time.Now().Before(until) {
		if idem {
			window <- ib.idem.PublishAsync(ctx, nil, batch)
		} else {
			window <- ib.plain.PublishAsync(batch)
		}
	}
	close(window)
	wg.Wait()
	return n
}

func benchIdemLatency(b *testing.B, fsync string) {
	ctx := benchCtx(b)
	ib := newIdemBench(b, ctx, fsync)
	one := [][]byte{make([]byte, 256)}
	var lat [2][]time.Duration
	phases(b, 100*time.Millisecond, func(idem bool, until time.Time) {
		side := map[bool]int{false: 0, true: 1}[idem]
		for time.Now().Before(until) {
			t0 := time.Now()
			var err error
			if idem {
				_, err = ib.idem.Publish(ctx, one)
			} else {
				err = ib.plain.PublishBatch(ctx, one)
			}
			require.NoError(b, err)
			lat[side] = append(lat[side], time.Since(t0))
		}
	})
	p50 := func(i int) float64 {
		slices.Sort(lat[i])
		return micros(percentile(lat[i], 0.50))
	}
	b.ReportMetric(p50(0), "p50_us_plain")
	b.ReportMetric(p50(1), "p50_us_idem")
	b.ReportMetric(p50(1)/p50(0), "idem/plain_p50")
}
