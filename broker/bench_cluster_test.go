package broker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
)

// BenchmarkClusterForward4KiBx64 measures what forwarding costs (the
// published Felix measured ~2× CPU per byte): two brokers in this
// process, one stream of one shard owned by b2, a subscriber on b2, and a
// publisher connected to the owner (owner) or to b1, which forwards every
// batch to b2 (non_owner). 4 KiB payloads, 64 per acked batch, 16 batches
// in flight, Block policy (lossless). cpu-s/GB is the whole process's CPU
// (brokers, clients, forwarder) per GB of payload delivered, MB = 10^6
// bytes; compare the two inside one run. Fixed volume as
// BenchmarkThroughput4KiBx64 (16 MiB at -benchtime=1x).
func BenchmarkClusterForward4KiBx64(b *testing.B) {
	for _, via := range []string{"owner", "non_owner"} {
		b.Run(via, func(b *testing.B) { benchClusterForward(b, via == "non_owner") })
	}
}

func benchClusterForward(b *testing.B, viaNonOwner bool) {
	vol := benchVolume(b)
	msgs := vol / benchMsgSize
	spec := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "bench"}, Shards: 1}
	nodes, _ := startClusterCfg(b, []string{"b1", "b2"}, []broker.StreamSpec{spec}, false,
		broker.Config{Queue: fanout.Config{Policy: fanout.Block}})
	p := assign(1, members(nodes), spec.StreamKey, false, "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := benchCtx(b)
	sub, err := nodes[1].h.dial(b).Subscribe(ctx, "default", "bench", client.SubscribeOptions{})
	require.NoError(b, err)
	r := &benchReader{sub: sub, target: uint64(msgs), done: make(chan struct{})}
	go r.run(ctx)
	entry := nodes[1]
	if viaNonOwner {
		entry = nodes[0]
	}
	pub, err := entry.h.dial(b).NewPublisher(ctx, "default", "bench")
	require.NoError(b, err)
	payloads := benchPayloads(benchBatch, benchMsgSize)
	b.ResetTimer()
	cpu0, start := processCPU(), time.Now()
	require.NoError(b, publishWindowed(ctx, pub, payloads, msgs, benchWindow))
	delivered, dropped, bytes, last := waitReaders(b, []*benchReader{r})
	cpu := processCPU() - cpu0
	b.StopTimer()
	require.Equal(b, uint64(msgs), delivered)
	require.Zero(b, dropped)
	reportRate(b, bytes, msgs, last.Sub(start), cpu)
	if cpu > 0 {
		b.ReportMetric(cpu.Seconds()/(float64(bytes)/1e9), "cpu-s/GB")
	}
	fwd := nodes[0].b.ClusterStats().ForwardedEvents
	if viaNonOwner {
		require.Equal(b, uint64(msgs), fwd, "every event forwarded once")
	} else {
		require.Zero(b, fwd)
	}
}
