package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/fanout"
)

// requireExact checks the accounting contract on every subscriber of every
// round: delivered + dropped == published, nothing twice.
func requireExact(t *testing.T, res Result) {
	t.Helper()
	require.NotEmpty(t, res.Rounds)
	for _, r := range res.Rounds {
		require.Empty(t, r.Errors, "round %d", r.Round)
		require.Zero(t, r.PublishFailed, "round %d", r.Round)
		require.Zero(t, r.Unaccounted, "round %d", r.Round)
		for _, s := range r.Subscribers {
			require.Equal(t, s.Published, s.Delivered+s.Dropped, "round %d subscriber %d: delivered %d + dropped %d", r.Round, s.ID, s.Delivered, s.Dropped)
			require.Zero(t, s.Unaccounted, "round %d subscriber %d", r.Round, s.ID)
			require.Zero(t, s.Duplicates, "round %d subscriber %d", r.Round, s.ID)
			require.Empty(t, s.Error)
		}
	}
}

func TestLatencyRunEndToEndWritesJSON(t *testing.T) {
	tb := startBroker(t, latencyBroker)
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	res := runCLI(t, tb.args("--profile", "latency", "--count", "300", "--warmup", "50ms",
		"--subscribers", "2", "--repeat", "2", "--json", jsonFile)...)
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	require.Contains(t, res.stdout, "profile latency, 1 publisher × 2 subscribers, payload 256 B, batch 1, ack each (inflight 1) idempotent")
	require.Contains(t, res.stdout, "stream t1/default/loadgen-1s-ephemeral: 1 shard, ephemeral")
	require.Contains(t, res.stdout, "publish→delivery")
	require.Contains(t, res.stdout, "over 2 rounds:")
	require.NotContains(t, res.stderr, "warning: undersized run")

	raw, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	var out Result
	require.NoError(t, json.Unmarshal(raw, &out))
	requireExact(t, out)
	require.Equal(t, "latency", out.Config.Profile)
	require.Equal(t, "each", out.Config.Ack)
	require.Len(t, out.Rounds, 2)
	require.Equal(t, 2, out.Summary.Rounds)
	require.NotNil(t, out.Summary.MsgPerS)
	require.NotNil(t, out.Summary.AckP99)
	require.NotNil(t, out.Summary.DeliveryP50)
	require.False(t, out.Undersized)
	require.True(t, out.Streams[0].Created || out.Streams[0].Shards == 1)
	for _, r := range out.Rounds {
		require.EqualValues(t, 300, r.PublishedMeasured)
		require.GreaterOrEqual(t, r.Published, r.PublishedMeasured) // plus the warm-up
		require.EqualValues(t, 300, r.AckLatency.Count)
		require.EqualValues(t, 600, r.DeliveryLatency.Count) // 2 subscribers
		require.EqualValues(t, 600, r.DeliveredMeasured)
		require.Positive(t, r.MsgPerS)
		require.Positive(t, r.AckLatency.P50)
		require.LessOrEqual(t, r.AckLatency.P50, r.AckLatency.P99)
		require.LessOrEqual(t, r.AckLatency.P99, r.AckLatency.Max)
		require.Len(t, r.Subscribers, 2)
		require.Len(t, r.Publishers, 1)
		require.Equal(t, []uint64{r.Published}, r.ShardEvents["loadgen-1s-ephemeral"])
	}
	// The JSON carries every documented field name.
	var generic map[string]any
	require.NoError(t, json.Unmarshal(raw, &generic))
	round := generic["rounds"].([]any)[0].(map[string]any)
	for _, k := range []string{"msg_per_s", "mb_per_s", "ack_latency", "delivery_latency", "delivered_msg_per_s",
		"dropped", "unaccounted", "retries", "transport", "subscribers", "publishers"} {
		require.Contains(t, round, k)
	}
	for _, k := range []string{"p50_us", "p90_us", "p99_us", "p999_us", "max_us"} {
		require.Contains(t, round["ack_latency"], k)
	}
	sub := round["subscribers"].([]any)[0].(map[string]any)
	for _, k := range []string{"published", "delivered", "dropped", "unaccounted"} {
		require.Contains(t, sub, k)
	}
}

// docs/design.md, "Semantics", subscribe: a full per-subscriber queue drops and the
// drop is reported, never silent. With a 4-event queue and a slow
// subscriber behind a small window the broker drops, and the loadgen's
// accounting still closes exactly for every subscriber.
func TestAccountingIsExactWhenTheBrokerDrops(t *testing.T) {
	for _, policy := range []fanout.Policy{fanout.DropNew, fanout.DropOld} {
		t.Run(policy.String(), func(t *testing.T) {
			bcfg := latencyBroker
			bcfg.Queue = fanout.Config{Capacity: 4, Policy: policy}
			tb := startBroker(t, bcfg)
			cfg := tb.config(t, "--profile", "latency", "--subscribers", "3", "--slow", "1", "--slow-delay", "5ms",
				"--slow-window", "64KiB", "--count", "3000", "--warmup", "0", "--inflight", "32")
			res, err := run(ctxT(t), cfg)
			require.NoError(t, err)
			requireExact(t, res)
			r := res.Rounds[0]
			require.EqualValues(t, 3000, r.Published)
			slow := r.Subscribers[0]
			require.True(t, slow.Slow)
			require.Positive(t, slow.Dropped, "the slow subscriber must have lost events to its 4-event queue")
			require.Equal(t, r.Dropped, r.Subscribers[0].Dropped+r.Subscribers[1].Dropped+r.Subscribers[2].Dropped)
			require.NotNil(t, r.HealthyDeliveryLatency)
			require.Equal(t, r.Dropped-slow.Dropped, *r.HealthyDropped)
		})
	}
}

func TestZeroBytePayloadsAreCountedWithoutLatency(t *testing.T) {
	tb := startBroker(t, latencyBroker)
	res := runCLI(t, tb.args("--count", "200", "--warmup", "0", "--payload", "0")...)
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	require.Contains(t, res.stdout, "publish→delivery latency n/a: payloads under 16 bytes carry no timestamp")

	cfg := tb.config(t, "--count", "200", "--warmup", "0", "--payload", "0")
	out, err := run(ctxT(t), cfg)
	require.NoError(t, err)
	requireExact(t, out)
	r := out.Rounds[0]
	require.Nil(t, r.DeliveryLatency)
	require.NotEmpty(t, r.DeliveryLatencyNote)
	require.EqualValues(t, 200, r.Subscribers[0].Delivered)
	require.NotNil(t, r.AckLatency)
}

// A throughput run over two streams of two shards, fire-and-forget: the
// accounting holds across shards and streams, and a run this small is
// flagged as undersized on stderr and in the JSON.
func TestUndersizedWarningFiresForATinyThroughputRun(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	res := runCLI(t, tb.args("--profile", "throughput", "--streams", "2", "--shards", "2", "--subscribers", "2",
		"--count", "4000", "--warmup", "0", "--json", jsonFile)...)
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	require.Contains(t, res.stderr, "warning: undersized run:")
	raw, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	var out Result
	require.NoError(t, json.Unmarshal(raw, &out))
	requireExact(t, out)
	require.True(t, out.Undersized)
	r := out.Rounds[0]
	require.True(t, r.Transport.Undersized)
	require.EqualValues(t, 4000, r.Published)
	require.Nil(t, r.AckLatency) // fire-and-forget
	require.Len(t, out.Streams, 2)
	require.Equal(t, "loadgen-2s-ephemeral-0", out.Streams[0].Name)
	var perShard uint64
	for _, counts := range r.ShardEvents {
		require.Len(t, counts, 2)
		perShard += counts[0] + counts[1]
	}
	require.EqualValues(t, 4000, perShard)
	// 4 publishers (1 stream each) + 2 subscribers (2 event streams each),
	// default windows: 4×16 MiB + 2×32 MiB.
	require.EqualValues(t, 4*16<<20+2*32<<20, r.Transport.AbsorbBytes)
}

func TestPacedPublishersKeepTheRate(t *testing.T) {
	tb := startBroker(t, latencyBroker)
	cfg := tb.config(t, "--publishers", "2", "--rate", "2000", "--count", "200", "--warmup", "0", "--inflight", "4")
	res, err := run(ctxT(t), cfg)
	require.NoError(t, err)
	requireExact(t, res)
	r := res.Rounds[0]
	// 200 messages at 2,000 msg/s take 100 ms; pacing never runs early.
	require.GreaterOrEqual(t, r.MeasuredSeconds, 0.095)
	require.LessOrEqual(t, r.MsgPerS, 2100.0)
}

// A Block queue makes acked publishes wait for the slow subscriber; past
// the broker's admission timeout it refuses them whole, the publisher
// re-sends them and counts retries, and the accounting still closes (a
// refused publish was never published).
func TestRefusedPublishesAreRetriedAndCounted(t *testing.T) {
	bcfg := latencyBroker
	bcfg.Queue = fanout.Config{Capacity: 2, Policy: fanout.Block}
	bcfg.AdmitTimeout = 5 * time.Millisecond
	tb := startBroker(t, bcfg)
	cfg := tb.config(t, "--subscribers", "2", "--slow", "1", "--slow-delay", "1ms", "--slow-window", "64KiB",
		"--count", "800", "--warmup", "0", "--inflight", "32", "--retries", "1000")
	res, err := run(ctxT(t), cfg)
	require.NoError(t, err)
	r := res.Rounds[0]
	require.Empty(t, r.Errors)
	require.EqualValues(t, 800, r.Published)
	require.Positive(t, r.Retries, "the admission timeout should have refused some publishes")
	require.Zero(t, r.Dropped) // Block is lossless
	for _, s := range r.Subscribers {
		require.Equal(t, s.Published, s.Delivered, "subscriber %d", s.ID)
		require.Zero(t, s.Unaccounted)
	}
}

func TestDurableStreamsAreCreatedWithTheirFsyncMode(t *testing.T) {
	tb := startBroker(t, broker.Config{DataDir: t.TempDir()})
	cfg := tb.config(t, "--profile", "throughput", "--ack", "batch", "--durable", "--fsync", "on_commit",
		"--publishers", "2", "--shards", "2", "--count", "2000", "--warmup", "0")
	res, err := run(ctxT(t), cfg)
	require.NoError(t, err)
	requireExact(t, res)
	require.Equal(t, []streamInfo{{Name: "loadgen-2s-on_commit", Shards: 2, Durable: true, Fsync: "on_commit", Created: true}}, res.Streams)
	r := res.Rounds[0]
	require.EqualValues(t, 2000, r.Published)
	require.NotNil(t, r.AckLatency) // one ack per batch of 64
	require.Less(t, r.AckLatency.Count, uint64(2000))

	// The same stream asked for again is used as it is, with a note when
	// the flags ask for something else.
	cfg = tb.config(t, "--stream", "loadgen-2s-on_commit", "--count", "10", "--warmup", "0")
	res, err = run(ctxT(t), cfg)
	require.NoError(t, err)
	requireExact(t, res)
	require.Equal(t, []string{"stream loadgen-2s-on_commit exists with 2 shard(s), durable on_commit; using it as it is"}, res.Notes)
	require.False(t, res.Streams[0].Created)
}

func TestDurableRunOnABrokerWithoutDataDirSaysWhy(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	res := runCLI(t, tb.args("--durable", "--count", "10")...)
	require.Equal(t, exitFail, res.code)
	require.Contains(t, res.stderr, "felix-loadgen: create stream loadgen-1s-periodic: broker says: ")
}

// Acked runs go through an idempotent producer by default, publisher i to
// shard i mod --shards; --idempotent=false publishes plainly. Both are
// exact, with no duplicate.
func TestIdempotentAndPlainAckedRuns(t *testing.T) {
	tb := startBroker(t, broker.Config{DataDir: t.TempDir()})
	for _, idem := range []string{"true", "false"} {
		cfg := tb.config(t, "--profile", "throughput", "--ack", "batch", "--durable", "--fsync", "on_commit", "--idempotent="+idem,
			"--publishers", "2", "--shards", "2", "--count", "2000", "--warmup", "0", "--stream", "idem-"+idem)
		res, err := run(ctxT(t), cfg)
		require.NoError(t, err)
		requireExact(t, res)
		require.Equal(t, idem == "true", res.Config.Idempotent)
		require.EqualValues(t, 2000, res.Rounds[0].Published)
		if idem == "true" {
			require.Equal(t, []uint64{1000, 1000}, res.Rounds[0].ShardEvents["idem-true"], "one publisher per shard")
		}
	}
}
