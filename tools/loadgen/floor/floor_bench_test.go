package floor_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/tools/loadgen/floor"
)

// TestMain runs a yardstick's server when a benchmark started this binary
// as a child (floor.ChildEnv): the bare echo server, or a broker.
func TestMain(m *testing.M) {
	var err error
	switch os.Getenv(floor.ChildEnv) {
	case "":
		os.Exit(m.Run())
	case "echo":
		err = floor.ServeEchoChild(os.Stdin, os.Stdout, "")
	case "echo-sync":
		err = floor.ServeEchoChild(os.Stdin, os.Stdout, os.Getenv(dataDirEnv))
	case "broker":
		err = serveBrokerChild()
	default:
		err = fmt.Errorf("unknown role %q", os.Getenv(floor.ChildEnv))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// dataDirEnv is the broker child's data directory.
const dataDirEnv = "FELIX_FLOOR_DATA_DIR"

// serveBrokerChild is the broker role: a broker with the defaults and the
// latency profile's delivery batching, serving an ephemeral and a durable
// on_commit stream of one shard, on the udp conn, until stdin ends.
func serveBrokerChild() error {
	cert, pc, err := floor.Endpoint()
	if err != nil {
		return err
	}
	defer pc.Close()
	b, err := broker.New(broker.Config{
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert.TLS}},
		DataDir:     os.Getenv(dataDirEnv),
		ListenAddrs: []string{pc.LocalAddr().String()},
		Batch:       fanout.BatchConfig{MaxEvents: 1, MaxDelay: fanout.NoDelay},
	})
	if err != nil {
		return err
	}
	for _, spec := range []broker.StreamSpec{
		{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "floor", Stream: "ephemeral"}, Shards: 1},
		{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "floor", Stream: "on_commit"}, Shards: 1, Durable: true, Fsync: "on_commit"},
	} {
		if err := b.CreateStream(spec); err != nil {
			b.Close()
			return err
		}
	}
	served := make(chan error, 1)
	go func() { served <- b.Serve(pc) }()
	<-b.Listening()
	packets := floor.SocketPackets(pc)
	err = floor.RunChild(os.Stdin, os.Stdout, pc.LocalAddr().String(), cert.Fingerprint, func(c *floor.Counts) {
		packets(c)
		c.Syncs, c.SyncTime = brokerSyncs(b)
	})
	b.Close()
	<-served
	return err
}

// brokerSyncs reads the broker's sync count and total sync time from its
// /metrics, as an operator would.
func brokerSyncs(b *broker.Broker) (uint64, time.Duration) {
	rec := httptest.NewRecorder()
	b.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var n uint64
	var sum float64
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "felix_commit_sync_latency_seconds_count "); ok {
			n, _ = strconv.ParseUint(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "felix_commit_sync_latency_seconds_sum "); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
	}
	return n, time.Duration(sum * 1e9)
}

// phase is one yardstick or the broker operation measured next to it.
type phase struct {
	name   string
	op     func() (time.Duration, error)
	server *floor.Child // nil: no server side (the raw sync)
	client func() floor.Counts
	lat    []time.Duration
	srv    floor.Counts
	cli    floor.Counts
}

func (p *phase) run(b *testing.B, d time.Duration, measure bool) {
	var s0, c0 floor.Counts
	if measure {
		s0, c0 = p.serverCounts(b), p.client()
	}
	for start := time.Now(); time.Since(start) < d; {
		l, err := p.op()
		require.NoError(b, err, p.name)
		if measure {
			p.lat = append(p.lat, l)
		}
	}
	if measure {
		s1, c1 := p.serverCounts(b), p.client()
		p.srv = p.srv.Add(s1.Sub(s0))
		p.cli = p.cli.Add(c1.Sub(c0))
	}
}

func (p *phase) serverCounts(b *testing.B) floor.Counts {
	if p.server == nil {
		return floor.Counts{}
	}
	c, err := p.server.Stats()
	require.NoError(b, err)
	return c
}

func (p *phase) pct(q float64) float64 {
	slices.Sort(p.lat)
	return float64(p.lat[min(len(p.lat)-1, int(q*float64(len(p.lat))))].Nanoseconds()) / 1e3
}

func (p *phase) per(v float64) float64 { return v / float64(len(p.lat)) }

// mean is the mean latency, µs.
func (p *phase) mean() float64 {
	var sum time.Duration
	for _, l := range p.lat {
		sum += l
	}
	return float64(sum.Nanoseconds()) / float64(len(p.lat)) / 1e3
}

// BenchmarkFloor puts an acked publish next to the transport's floor, in
// one run, interleaved: a bare quic-go request/response (bare: a child
// process running floor.ServeEcho, the request the bytes of a 256 B acked
// publish, the reply those of its ack) and an acked publish of 256 B to an
// ephemeral stream of a broker child (ack); a raw 4 KiB append + fdatasync
// on a preallocated file in this process (fsync) and the same publish to a
// durable on_commit stream (on_commit); and the bare round trip to a child
// that appends each request's payload to a preallocated file and
// fdatasyncs before the reply, on the goroutine that read it (bare_fsync:
// the on_commit floor, one round trip and one sync of a record that size,
// with no hand-off). One request at a time, each phase for the case time
// in 8 slices whose order alternates, after a warm-up.
//
// Reported: p50/p99 of each (µs), the ratios the acked publish is held to
// (ack_p50/bare, ack_p99/bare, and on_commit_p50 over bare_p50 +
// fsync_p50; bare_fsync's the same; on_commit_p50 - bare_fsync_p50), and
// per round trip on both sides: CPU (µs), OS thread wake-ups and packets
// (server in/out, client out/in).
func BenchmarkFloor(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exe, err := os.Executable()
	require.NoError(b, err)
	dir := b.TempDir()
	echo, err := floor.StartChild(ctx, exe, "echo", nil, nil)
	require.NoError(b, err)
	defer echo.Close()
	echoSync, err := floor.StartChild(ctx, exe, "echo-sync", nil, []string{dataDirEnv + "=" + dir})
	require.NoError(b, err)
	defer echoSync.Close()
	brk, err := floor.StartChild(ctx, exe, "broker", nil, []string{dataDirEnv + "=" + dir})
	require.NoError(b, err)
	defer brk.Close()

	payload := make([]byte, 256)
	bare, err := floor.DialEcho(ctx, echo.Addr, echo.Fingerprint)
	require.NoError(b, err)
	defer bare.Close()
	bareSync, err := floor.DialEcho(ctx, echoSync.Addr, echoSync.Fingerprint)
	require.NoError(b, err)
	defer bareSync.Close()
	c, err := client.Dial(ctx, brk.Addr, client.Config{Tenant: "t1", Token: "dev", TLS: devtls.PinnedConfig(brk.Fingerprint)})
	require.NoError(b, err)
	defer c.Close()
	eph, err := c.NewPublisher(ctx, "floor", "ephemeral")
	require.NoError(b, err)
	dur, err := c.NewPublisher(ctx, "floor", "on_commit")
	require.NoError(b, err)
	raw, err := floor.OpenRawSync(dir)
	require.NoError(b, err)
	defer raw.Close()

	req := floor.Request(payload)
	publish := func(p *client.Publisher) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			t0 := time.Now()
			err := p.Publish(ctx, payload)
			return time.Since(t0), err
		}
	}
	quicPackets := func(n *floor.Counts) {
		st := c.Conn().ConnectionStats()
		n.PacketsIn, n.PacketsOut = st.PacketsReceived, st.PacketsSent
	}
	barePackets := func(e *floor.Echo) func(*floor.Counts) {
		return func(n *floor.Counts) { n.PacketsOut, n.PacketsIn = e.Packets() }
	}
	phases := []*phase{
		{name: "bare", op: func() (time.Duration, error) { return bare.RoundTrip(req) }, server: echo,
			client: func() floor.Counts { return floor.Own(barePackets(bare)) }},
		{name: "ack", op: publish(eph), server: brk, client: func() floor.Counts { return floor.Own(quicPackets) }},
		{name: "fsync", op: raw.Append, client: func() floor.Counts { return floor.Own(nil) }},
		{name: "on_commit", op: publish(dur), server: brk, client: func() floor.Counts { return floor.Own(quicPackets) }},
		{name: "bare_fsync", op: func() (time.Duration, error) { return bareSync.RoundTrip(req) }, server: echoSync,
			client: func() floor.Counts { return floor.Own(barePackets(bareSync)) }},
	}
	caseTime := floorCaseTime() * time.Duration(b.N)
	const nslices = 8
	b.ResetTimer()
	for _, p := range phases {
		p.run(b, caseTime/nslices/2, false)
	}
	for i := range nslices {
		order := slices.Clone(phases)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			p.run(b, caseTime/nslices, true)
		}
	}
	b.StopTimer()
	report(b, phases)
}

func report(b *testing.B, phases []*phase) {
	byName := map[string]*phase{}
	for _, p := range phases {
		byName[p.name] = p
		b.ReportMetric(p.pct(0.50), p.name+"_p50_us")
		b.ReportMetric(p.pct(0.99), p.name+"_p99_us")
		if p.server != nil {
			b.ReportMetric(p.per(float64(p.srv.CPU.Nanoseconds()))/1e3, p.name+"_srv_cpu_us")
			b.ReportMetric(p.per(float64(p.srv.Wakeups)), p.name+"_srv_wakeups")
			b.ReportMetric(p.per(float64(p.srv.Allocs)), p.name+"_srv_allocs")
			b.ReportMetric(p.per(float64(p.srv.PacketsIn)), p.name+"_srv_pkts_in")
			b.ReportMetric(p.per(float64(p.srv.PacketsOut)), p.name+"_srv_pkts_out")
			b.ReportMetric(p.per(float64(p.cli.PacketsOut)), p.name+"_cli_pkts_out")
			b.ReportMetric(p.per(float64(p.cli.PacketsIn)), p.name+"_cli_pkts_in")
		}
		if p.srv.Syncs > 0 {
			b.ReportMetric(float64(p.srv.SyncTime.Nanoseconds())/float64(p.srv.Syncs)/1e3, p.name+"_srv_sync_mean_us")
		}
		b.ReportMetric(p.per(float64(p.cli.CPU.Nanoseconds()))/1e3, p.name+"_cli_cpu_us")
		b.ReportMetric(p.per(float64(p.cli.Wakeups)), p.name+"_cli_wakeups")
		b.ReportMetric(p.per(float64(p.cli.Allocs)), p.name+"_cli_allocs")
	}
	bare, ack, fsync, dur, bareSync := byName["bare"], byName["ack"], byName["fsync"], byName["on_commit"], byName["bare_fsync"]
	b.ReportMetric(ack.pct(0.50)/bare.pct(0.50), "ack_p50/bare")
	b.ReportMetric(ack.pct(0.99)/bare.pct(0.99), "ack_p99/bare")
	b.ReportMetric(float64(ack.srv.CPU)/float64(len(ack.lat))/(float64(bare.srv.CPU)/float64(len(bare.lat))), "ack_cpu/bare")
	b.ReportMetric((dur.pct(0.50)-bare.pct(0.50))/fsync.pct(0.50), "on_commit_extra/fsync")
	b.ReportMetric((bareSync.pct(0.50)-bare.pct(0.50))/fsync.pct(0.50), "bare_fsync_extra/fsync")
	b.ReportMetric(dur.pct(0.50)-bareSync.pct(0.50), "on_commit-bare_fsync_us")
	b.ReportMetric(fsync.mean(), "fsync_mean_us")
	b.ReportMetric(ack.pct(0.50)*1e3, "ns/op")
}

// floorCaseTime is each phase's measured time: 4 s under FELIX_BENCH_FULL,
// 100 ms otherwise (a smoke run), or FELIX_BENCH_CASE_TIME.
func floorCaseTime() time.Duration {
	if s := os.Getenv("FELIX_BENCH_CASE_TIME"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	if os.Getenv("FELIX_BENCH_FULL") != "" {
		return 4 * time.Second
	}
	return 100 * time.Millisecond
}
