package broker_test

// Pub/sub benchmarks: an in-process broker serving real QUIC (TLS on) on
// 127.0.0.1, publishers and subscribers each on their own client connection
// (own UDP socket, own quic.Transport) in the same process. Everything
// shares the machine's cores: the numbers measure broker + clients + QUIC
// together, and docs/BENCHMARKS.md says what limits each one.
//
// Every benchmark is self-contained (it starts its own broker) and reports
// custom metrics with b.ReportMetric. scripts/bench-broker.sh runs each one
// as a fresh process several times and prints min/median/max.
//
// The fixed-volume benchmarks (Throughput4KiBx64, RelayBaseline4KiBx64)
// move 512 MiB per invocation regardless of b.N, except when b.N == 1 and
// FELIX_BENCH_FULL is unset (the CI bench smoke, -benchtime=1x): then they
// move 16 MiB and print a WARNING that the run is undersized.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/udp"
)

const (
	benchWarmup   = 200              // acked publishes before the timed ones
	benchMsgSize  = 4 << 10          // throughput payload
	benchBatch    = 64               // payloads per publish in throughput runs
	benchWindow   = 16               // acked batches in flight in throughput runs
	benchFullVol  = 512 << 20        // bytes per fixed-volume run
	benchSmokeVol = 16 << 20         // bytes at -benchtime=1x without FELIX_BENCH_FULL
	benchQUICConn = 64 << 20         // default connection receive window (broker and client)
	benchDrainMax = 60 * time.Second // how long subscribers may take to catch up
)

// benchLatencyProfile is FELIX_EVENT_BATCH_MAX_EVENTS=1, MAX_DELAY_US=0.
var benchLatencyProfile = fanout.BatchConfig{MaxEvents: 1, MaxDelay: fanout.NoDelay}

// benchBroker is a broker on 127.0.0.1 with a fresh self-signed certificate
// (brokertest) and the clients a benchmark dialled to it.
type benchBroker struct {
	b         *broker.Broker
	pc        net.PacketConn
	addr      string
	clientTLS *tls.Config
	bt        *brokertest.Broker
	clients   []*client.Client
	closeOnce sync.Once
}

// benchPlainUDP: FELIX_BENCH_CONN=plain runs broker, clients and relay on
// stock *net.UDPConn sockets; the default is the udp conn felix-broker and
// client.Dial use.
func benchPlainUDP() bool { return os.Getenv("FELIX_BENCH_CONN") == "plain" }

// benchListen opens a UDP socket of the selected kind.
func benchListen(b *testing.B, addr string) net.PacketConn {
	b.Helper()
	var pc net.PacketConn
	var err error
	if benchPlainUDP() {
		pc, err = net.ListenPacket("udp", addr)
	} else {
		pc, err = udp.Listen("udp", addr, udp.Config{})
	}
	require.NoError(b, err)
	return pc
}

func startBenchBroker(b *testing.B, cfg broker.Config) *benchBroker {
	b.Helper()
	applyBenchTrace(&cfg)
	spec := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "bench"}, Shards: 1}
	bt := brokertest.Start(b, cfg, brokertest.Options{Streams: []broker.StreamSpec{spec}, PlainUDP: benchPlainUDP()})
	bb := &benchBroker{b: bt.Broker, pc: bt.PacketConn, addr: bt.Addr, clientTLS: bt.ClientTLS, bt: bt}
	b.Cleanup(func() { bb.close(b) })
	return bb
}

// close closes every client, then the broker; safe to call twice.
func (bb *benchBroker) close(b *testing.B) {
	bb.closeOnce.Do(func() {
		for _, c := range bb.clients {
			c.Close()
		}
		bb.bt.Close(b)
	})
}

// dial opens a client connection; cfg may set windows and buffers.
func (bb *benchBroker) dial(b *testing.B, cfg client.Config) *client.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Tenant, cfg.Token, cfg.TLS = "t1", "dev", bb.clientTLS
	cfg.PlainUDP = benchPlainUDP()
	c, err := client.Dial(ctx, bb.addr, cfg)
	require.NoError(b, err)
	bb.clients = append(bb.clients, c)
	return c
}

func (bb *benchBroker) publisher(b *testing.B, ctx context.Context) *client.Publisher {
	pub, err := bb.dial(b, client.Config{}).NewPublisher(ctx, "default", "bench")
	require.NoError(b, err)
	require.True(b, pub.Binary())
	return pub
}

// benchReader drains one subscription (on its own connection) until it has
// seen target events, counting deliveries, payload bytes and reported drops.
type benchReader struct {
	sub       *client.Subscription
	delay     atomic.Int64 // ns to sleep per event: a slow consumer
	target    uint64
	delivered uint64
	dropped   uint64
	bytes     uint64
	last      time.Time // when the last event arrived
	err       error
	done      chan struct{}
}

// startReaders subscribes n readers, each on its own connection, and starts
// draining. Each stops after target events (delivered + dropped).
func (bb *benchBroker) startReaders(b *testing.B, ctx context.Context, n int, target uint64, cfg client.Config) []*benchReader {
	b.Helper()
	rs := make([]*benchReader, n)
	for i := range rs {
		sub, err := bb.dial(b, cfg).Subscribe(ctx, "default", "bench", client.SubscribeOptions{})
		require.NoError(b, err)
		rs[i] = &benchReader{sub: sub, target: target, done: make(chan struct{})}
	}
	for _, r := range rs {
		go r.run(ctx)
	}
	return rs
}

func (r *benchReader) run(ctx context.Context) {
	defer close(r.done)
	var next uint64 // offsets must rise: order is per shard
	for r.delivered+r.dropped < r.target {
		ev, err := r.sub.Next(ctx)
		if err != nil {
			r.err = fmt.Errorf("subscription %d after %d delivered, %d dropped: %w", r.sub.ID(), r.delivered, r.dropped, err)
			return
		}
		if ev.Dropped != 0 {
			r.dropped += ev.Dropped
			continue
		}
		if !ev.HasOffset || ev.Offset < next {
			r.err = fmt.Errorf("subscription %d: offset %d after %d", r.sub.ID(), ev.Offset, next)
			return
		}
		next = ev.Offset + 1
		r.delivered++
		r.bytes += uint64(len(ev.Payload))
		r.last = time.Now()
		if d := r.delay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
	}
}

// waitReaders waits until every reader has seen its target, and returns the
// totals and the time of the last delivery.
func waitReaders(b *testing.B, rs []*benchReader) (delivered, dropped, bytes uint64, last time.Time) {
	b.Helper()
	deadline := time.After(benchDrainMax)
	for _, r := range rs {
		select {
		case <-r.done:
		case <-deadline:
			b.Fatalf("subscription %d still draining after %v: delivered %d + dropped %d of %d (reported dropped %d)",
				r.sub.ID(), benchDrainMax, r.sub.Delivered(), r.sub.Dropped(), r.target, r.sub.Dropped())
		}
		require.NoError(b, r.err)
		delivered, dropped, bytes = delivered+r.delivered, dropped+r.dropped, bytes+r.bytes
		if r.last.After(last) {
			last = r.last
		}
	}
	return delivered, dropped, bytes, last
}

// percentile is the nearest-rank q-quantile of sorted (exact, no buckets).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// sequentialAcked publishes n acked payloads one at a time (one outstanding)
// and returns each ack latency, sorted.
func sequentialAcked(b *testing.B, ctx context.Context, pub *client.Publisher, payload []byte, n int) []time.Duration {
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if err := pub.Publish(ctx, payload); err != nil {
			b.Fatalf("publish %d: %v", i, err)
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	return lat
}

// BenchmarkAckedPublishLatency: latency profile, one publisher doing
// sequential acked publishes, fanout subscribers each on its own connection
// draining concurrently. ns/op is the mean ack latency.
func BenchmarkAckedPublishLatency(b *testing.B) {
	for _, size := range []int{0, 256, 4096} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			for _, fan := range []int{1, 10, 50} {
				b.Run(fmt.Sprintf("fanout=%d", fan), func(b *testing.B) { benchAckedLatency(b, size, fan) })
			}
		})
	}
}

func benchAckedLatency(b *testing.B, size, fan int) {
	bb := startBenchBroker(b, broker.Config{Batch: benchLatencyProfile})
	ctx := benchCtx(b)
	total := uint64(benchWarmup + b.N)
	rs := bb.startReaders(b, ctx, fan, total, client.Config{})
	pub := bb.publisher(b, ctx)
	payload := make([]byte, size)
	sequentialAcked(b, ctx, pub, payload, benchWarmup)
	b.ResetTimer()
	lat := sequentialAcked(b, ctx, pub, payload, b.N)
	b.StopTimer()
	delivered, dropped, _, _ := waitReaders(b, rs)
	require.Equal(b, total*uint64(fan), delivered+dropped, "delivered + dropped == published × fanout")
	b.ReportMetric(micros(percentile(lat, 0.50)), "p50_us")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99_us")
	b.ReportMetric(float64(dropped), "dropped")
}

func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// benchVolume is the fixed volume of a throughput run, in bytes, rounded
// down to whole batches of 64 × 4 KiB.
func benchVolume(b *testing.B) int {
	vol := benchFullVol
	if b.N == 1 && os.Getenv("FELIX_BENCH_FULL") == "" {
		vol = benchSmokeVol
	}
	if vol < 2*benchQUICConn {
		b.Logf("WARNING: volume %d MiB is below 2× the QUIC connection window (%d MiB): "+
			"the result is dominated by buffering, not throughput (set FELIX_BENCH_FULL=1)", vol>>20, benchQUICConn>>20)
	}
	chunk := benchMsgSize * benchBatch
	return vol / chunk * chunk
}

// benchPayloads returns n payloads of size bytes, filled with a pattern.
func benchPayloads(n, size int) [][]byte {
	mem := make([]byte, n*size)
	for i := range mem {
		mem[i] = byte(i)
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return out
}

// publishWindowed sends batches acked publishes of payloads (the last one
// cut to total messages) with at most window in flight, and returns the
// first error.
func publishWindowed(ctx context.Context, pub *client.Publisher, payloads [][]byte, total, window int) error {
	inflight := make(chan *client.PendingAck, window)
	errc := make(chan error, 1)
	go func() {
		var first error
		for pa := range inflight {
			if err := pa.Wait(ctx); err != nil && first == nil {
				first = err
			}
		}
		errc <- first
	}()
	for sent := 0; sent < total; sent += len(payloads) {
		inflight <- pub.PublishAsync(payloads[:min(len(payloads), total-sent)])
	}
	close(inflight)
	return <-errc
}

// BenchmarkThroughput4KiBx64: 4 KiB payloads, 64 per acked publish
// (pipelined, 16 in flight), fanout 1, Block policy (lossless), throughput
// batching profile. One fixed-volume run per invocation; MB/s is payload
// bytes delivered / (last delivery − first publish), MB = 10^6 bytes.
func BenchmarkThroughput4KiBx64(b *testing.B) {
	vol := benchVolume(b)
	msgs := vol / benchMsgSize
	bb := startBenchBroker(b, broker.Config{Queue: fanout.Config{Policy: fanout.Block}})
	ctx := benchCtx(b)
	rs := bb.startReaders(b, ctx, 1, uint64(msgs), client.Config{})
	pub := bb.publisher(b, ctx)
	payloads := benchPayloads(benchBatch, benchMsgSize)
	b.ResetTimer()
	cpu0, start := processCPU(), time.Now()
	require.NoError(b, publishWindowed(ctx, pub, payloads, msgs, benchWindow))
	delivered, dropped, bytes, last := waitReaders(b, rs)
	cpu := processCPU() - cpu0
	b.StopTimer()
	require.Equal(b, uint64(msgs), delivered, "Block is lossless: delivered == published")
	require.Zero(b, dropped)
	reportRate(b, bytes, msgs, last.Sub(start), cpu)
	if cpu > 0 {
		b.ReportMetric(cpu.Seconds()/(float64(bytes)/(1<<30)), "cpu-s/GiB")
	}
	b.ReportMetric(float64(bb.lost()), "lost_pkts")
	gso := 0
	for _, cs := range bb.b.Stats().Connections {
		if cs.GSO {
			gso++
		}
		// The per-connection picture behind a slow or fast run (the
		// bimodality check of scripts/bench-udp.sh compares them side by side).
		b.Logf("broker conn %s: rtt=%v min_rtt=%v cwnd=%d lost=%d sent=%d congestion_events=%d mtu=%d gso=%v",
			cs.Remote, cs.SmoothedRTT, cs.MinRTT, cs.CongestionWnd, cs.PacketsLost, cs.PacketsSent,
			cs.Path.CongestionEvents, cs.Path.MTU, cs.GSO)
	}
	b.ReportMetric(float64(gso), "gso_conns") // of 2: publisher and subscriber
	if uc, ok := bb.pc.(*udp.Conn); ok {
		st := uc.Stats()
		if st.RecvCalls > 0 {
			b.ReportMetric(float64(st.DatagramsIn)/float64(st.RecvCalls), "dgrams/call")
			b.ReportMetric(float64(st.PacketsIn)/float64(max(st.DatagramsIn, 1)), "pkts/dgram")
		}
	}
}

// lost sums the packets quic-go declared lost on every connection of the
// run, broker side and client side: loss on loopback means a socket buffer
// overflowed, and the congestion controller then cuts the rate.
func (bb *benchBroker) lost() uint64 {
	var n uint64
	for _, cs := range bb.b.Stats().Connections {
		n += cs.PacketsLost
	}
	for _, c := range bb.clients {
		n += c.Conn().ConnectionStats().PacketsLost
	}
	return n
}

// reportRate reports MB/s, the cores the process used, and ns per message
// as ns/op.
func reportRate(b *testing.B, bytes uint64, msgs int, elapsed, cpu time.Duration) {
	b.ReportMetric(float64(bytes)/elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(bytes>>20), "MiB")
	reportCPU(b, cpu, elapsed)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(msgs), "ns/op")
}

// BenchmarkDelivered256B: one publisher, 256 B payloads in acked batches of
// 64 (16 in flight), subs subscribers each on its own connection, Block
// policy, throughput batching profile. b.N is the number of messages
// published; delivered_msg/s is summed over subscribers.
func BenchmarkDelivered256B(b *testing.B) {
	for _, subs := range []int{1, 10, 50, 100} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) { benchDelivered(b, subs) })
	}
}

func benchDelivered(b *testing.B, subs int) {
	bb := startBenchBroker(b, broker.Config{Queue: fanout.Config{Policy: fanout.Block}})
	ctx := benchCtx(b)
	rs := bb.startReaders(b, ctx, subs, uint64(b.N), client.Config{})
	pub := bb.publisher(b, ctx)
	payloads := benchPayloads(benchBatch, 256)
	b.ResetTimer()
	cpu0, start := processCPU(), time.Now()
	require.NoError(b, publishWindowed(ctx, pub, payloads, b.N, benchWindow))
	delivered, dropped, _, last := waitReaders(b, rs)
	cpu := processCPU() - cpu0
	b.StopTimer()
	elapsed := last.Sub(start)
	require.Equal(b, uint64(b.N)*uint64(subs), delivered+dropped, "delivered + dropped == published × subs")
	b.ReportMetric(float64(delivered)/elapsed.Seconds(), "delivered_msg/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "published_msg/s")
	b.ReportMetric(float64(dropped), "dropped")
	reportCPU(b, cpu, elapsed)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(bb.lost()), "lost_pkts")
}

// Isolation: 10 subscribers, queue capacity 64, drop_new, latency profile.
// The subscribers' clients use small QUIC receive windows (64 KiB per
// stream) so that a slow subscriber's backlog reaches the broker's queue
// within a short run instead of parking up to 16 MiB in quic-go buffers.
const (
	isoSubs      = 10
	isoSlow      = 2
	isoSlowDelay = 5 * time.Millisecond
	isoPayload   = 256
)

var isoClient = client.Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 256 << 10}

// BenchmarkIsolation runs the same sequential acked publisher twice on
// fresh brokers: A with all 10 subscribers fast, B with 2 of them sleeping
// 5 ms per event. It reports p50/p99 of both, ratio = p50 B / p50 A, and the
// drops: per slow subscriber in B, and summed over the fast subscribers of
// each run (a fast subscriber drops only when the machine cannot keep up
// with the publisher).
// BenchmarkIsolationRun is one side of the isolation comparison per fresh
// process: slow=0 or slow=2 of 10 subscribers at 5 ms per event. The ratio
// of the two p50 medians across processes is the isolation figure.
func BenchmarkIsolationRun(b *testing.B) {
	for _, slow := range []int{0, isoSlow} {
		b.Run(fmt.Sprintf("slow=%d", slow), func(b *testing.B) {
			b.StopTimer()
			r := isolationRun(b, slow)
			b.ReportMetric(micros(percentile(r.lat, 0.5)), "p50_us")
			b.ReportMetric(micros(percentile(r.lat, 0.99)), "p99_us")
			b.ReportMetric(float64(r.slowDropped), "slow_dropped")
			b.ReportMetric(float64(r.fastDropped), "fast_dropped")
		})
	}
}

func BenchmarkIsolation(b *testing.B) {
	b.StopTimer()
	a := isolationRun(b, 0)
	w := isolationRun(b, isoSlow)
	p50a, p50w := percentile(a.lat, 0.5), percentile(w.lat, 0.5)
	b.ReportMetric(micros(p50a), "p50_without_us")
	b.ReportMetric(micros(p50w), "p50_with_us")
	b.ReportMetric(micros(percentile(a.lat, 0.99)), "p99_without_us")
	b.ReportMetric(micros(percentile(w.lat, 0.99)), "p99_with_us")
	b.ReportMetric(float64(p50w)/float64(p50a), "ratio")
	// No 1.2 bar here: a control with no slow subscriber in either run
	// (A then A' in one process) was bimodal too (ratios 1.28 and 3.45 in 2
	// of 8 fresh runs), so a within-process ratio measures a state the
	// second broker sometimes latches into, not isolation. The bar is judged
	// on BenchmarkIsolationRun medians across fresh processes (bench-broker.sh).
	b.ReportMetric(float64(w.slowDropped)/isoSlow, "slow_dropped")
	b.ReportMetric(float64(a.fastDropped), "fast_dropped_without")
	b.ReportMetric(float64(w.fastDropped), "fast_dropped_with")
}

type isolationResult struct {
	lat         []time.Duration // sorted ack latencies
	slowDropped uint64          // summed over the slow subscribers
	fastDropped uint64          // summed over the fast subscribers
}

// isolationRun publishes b.N acked events (after the warm-up) with slow
// slow subscribers among isoSubs, and checks every subscriber's accounting
// (delivered + gap-reported drops == published, gap reports ==
// Subscription.Dropped) once the slow ones drained their backlog.
func isolationRun(b *testing.B, slow int) isolationResult {
	bb := startBenchBroker(b, broker.Config{Batch: benchLatencyProfile,
		Queue: fanout.Config{Capacity: 64, Policy: fanout.DropNew}})
	defer bb.close(b)
	ctx := benchCtx(b)
	total := uint64(benchWarmup + b.N)
	rs := bb.startReaders(b, ctx, isoSubs, total, isoClient)
	pub := bb.publisher(b, ctx)
	payload := make([]byte, isoPayload)
	sequentialAcked(b, ctx, pub, payload, benchWarmup)
	for _, r := range rs[:slow] {
		r.delay.Store(int64(isoSlowDelay))
	}
	b.StartTimer()
	res := isolationResult{lat: sequentialAcked(b, ctx, pub, payload, b.N)}
	b.StopTimer()
	waitReaders(b, rs)
	for i, r := range rs {
		require.Equal(b, total, r.delivered+r.dropped, "subscriber %d: delivered + dropped == published", i)
		require.Equal(b, r.dropped, r.sub.Dropped(), "subscriber %d: gap reports == Subscription.Dropped", i)
		if i < slow {
			res.slowDropped += r.dropped
		} else {
			res.fastDropped += r.dropped
		}
	}
	return res
}

// reportCPU reports how many cores the process kept busy on average; runs
// shorter than half a second are skipped (the clock ticks are 10 ms).
func reportCPU(b *testing.B, cpu, elapsed time.Duration) {
	if cpu >= 0 && elapsed >= 500*time.Millisecond {
		b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu_cores")
	}
}

// processCPU is the user + system CPU time of this process so far, from
// /proc/self/stat (clock ticks of 10 ms); -1 where that file is missing.
func processCPU() time.Duration {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
