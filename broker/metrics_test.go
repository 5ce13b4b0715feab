package broker_test

import (
	"fmt"
	"math"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/testutil"
)

// metricsBearer is what scrapes of the admin API send.
const metricsBearer = ""

func scrape(t *testing.T, b *broker.Broker) testutil.Metrics {
	srv := httptest.NewServer(b.AdminHandler())
	defer srv.Close()
	return testutil.Scrape(t, srv.URL+"/metrics", metricsBearer)
}

func streamSpec(name string, shards int) broker.StreamSpec {
	return broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: name}, Shards: shards}
}

// /metrics on a broker with two streams has a series per stream (tenant,
// namespace, stream) and per shard for publishes, deliveries and ack
// latency, with latency buckets in plain seconds and delivered bytes
// counted as payload, as published bytes are.
func TestMetricsPerStreamSeries(t *testing.T) {
	h := startBroker(t, broker.Config{}, streamSpec("orders", 2), streamSpec("clicks", 1))
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	sub, err := c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{Shard: 1})
	require.NoError(t, err)
	pubOrders, err := c.NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, pubOrders.PublishShardAsync(uint32(i%2), [][]byte{[]byte("12345")}).Wait(ctx))
	}
	pubClicks, err := c.NewPublisher(ctx, "default", "clicks")
	require.NoError(t, err)
	require.NoError(t, pubClicks.Publish(ctx, []byte("12345")))
	_, err = sub.Next(ctx)
	require.NoError(t, err)

	m := scrape(t, h.b)
	orders := map[string]string{"tenant": "t1", "namespace": "default", "stream": "orders"}
	clicks := map[string]string{"tenant": "t1", "namespace": "default", "stream": "clicks"}
	value := func(name string, labels map[string]string) float64 {
		v, ok := m.Value(name, labels)
		require.True(t, ok, "%s%v missing", name, labels)
		return v
	}
	require.Equal(t, 3.0, value("felix_stream_publish_events_total", orders))
	require.Equal(t, 15.0, value("felix_stream_publish_bytes_total", orders))
	require.Equal(t, 1.0, value("felix_stream_publish_events_total", clicks))
	require.Equal(t, 3.0, value("felix_stream_publish_ack_latency_seconds", orders), "one observation per acked batch")
	require.Equal(t, 1.0, value("felix_stream_delivered_events_total", orders))
	require.Equal(t, 5.0, value("felix_stream_delivered_bytes_total", orders))
	require.Equal(t, 5.0, value("felix_delivered_bytes_total", nil), "payload bytes, as felix_publish_bytes_total")
	require.Greater(t, value("felix_delivered_frame_bytes_total", nil), 5.0, "frames carry headers and offsets")
	require.Equal(t, 1.0, value("felix_stream_subscribers", orders))
	require.Equal(t, 0.0, value("felix_stream_subscribers", clicks))
	require.Equal(t, 1.0, value("felix_shard_publish_events_total", map[string]string{"stream": "orders", "shard": "1"}))
	require.Equal(t, 2.0, value("felix_shard_next_offset", map[string]string{"stream": "orders", "shard": "0"}))
	require.Equal(t, 1.0, value("felix_build_info", map[string]string{"program": "felix-broker"}))

	var bounds []float64
	for _, b := range m["felix_publish_ack_latency_seconds"].Metric[0].Histogram.Bucket {
		bounds = append(bounds, b.GetUpperBound())
	}
	require.Equal(t, []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, math.Inf(1)}, bounds)
}

// The per-stream families hold at most MetricsStreamSeries streams of
// their own plus one "_other" series, and the per-shard ones only shards
// that fit MetricsShardSeries, whole streams at a time; nothing is lost:
// "_other" sums what it folds.
func TestMetricsSeriesAreBounded(t *testing.T) {
	var streams []broker.StreamSpec
	for i := range 6 {
		streams = append(streams, streamSpec(fmt.Sprintf("s%d", i), 2))
	}
	h := startBroker(t, broker.Config{MetricsStreamSeries: 2, MetricsShardSeries: 3}, streams...)
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	for _, s := range streams {
		pub, err := c.NewPublisher(ctx, "default", s.Stream)
		require.NoError(t, err)
		require.NoError(t, pub.PublishShardAsync(0, [][]byte{[]byte("x")}).Wait(ctx))
	}
	m := scrape(t, h.b)
	series := m.Series("felix_stream_publish_events_total")
	require.Len(t, series, 3, "two streams of their own and _other: %v", series)
	other, ok := m.Value("felix_stream_publish_events_total", map[string]string{"tenant": "_other", "namespace": "_other", "stream": "_other"})
	require.True(t, ok)
	require.Equal(t, 4.0, other)
	require.Len(t, m.Series("felix_shard_next_offset"), 2, "the first stream's two shards fit in 3; the second's do not")
	require.Len(t, m.Series("felix_stream_publish_ack_latency_seconds"), 3)
}

// Caches, rosters and consumer groups have metrics of their own: ops and
// their latency, sizes, membership changes, a group's lag and what it
// has in flight; a durable stream's sync latency uses the same buckets.
func TestMetricsCachesRostersGroupsAndSyncs(t *testing.T) {
	cache := broker.CacheSpec{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: "sessions"}}
	h := serve(t, broker.Config{DataDir: t.TempDir()}, brokertest.Options{
		Streams: []broker.StreamSpec{durableSpec("jobs", "on_commit")}, Caches: []broker.CacheSpec{cache}})
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	k, err := c.OpenCache(ctx, "default", "sessions")
	require.NoError(t, err)
	require.NoError(t, k.Put(ctx, "a", []byte("1"), 0))
	_, _, err = k.Get(ctx, "a")
	require.NoError(t, err)
	r, err := c.Roster(ctx, "default", "lobby")
	require.NoError(t, err)
	require.NoError(t, r.Join(ctx, "alice", nil))
	publishJobs(t, ctx, h, "jobs", 3)
	q, err := c.Consume(ctx, "default", "jobs", "workers", client.QueueOptions{Member: "w1", MaxInflight: 1})
	require.NoError(t, err)
	msg, err := q.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Ack(ctx, msg.Ref()))

	m := scrape(t, h.b)
	for name, want := range map[string]float64{
		`felix_cache_entries`: 1, `felix_roster_members`: 1, `felix_roster_joins_total`: 1, `felix_queue_acks_total`: 1,
	} {
		v, ok := m.Value(name, nil)
		require.True(t, ok, name)
		require.Equal(t, want, v, name)
	}
	for op, want := range map[string]float64{"put": 1, "get": 1} {
		v, _ := m.Value("felix_cache_ops_total", map[string]string{"op": op})
		require.Equal(t, want, v, op)
		v, _ = m.Value("felix_cache_op_latency_seconds", map[string]string{"op": op})
		require.Equal(t, want, v, op)
	}
	group := map[string]string{"stream": "jobs", "group": "workers"}
	lag, ok := m.Value("felix_queue_group_lag", group)
	require.True(t, ok)
	require.Equal(t, 2.0, lag, "three records, one acked")
	delivered, _ := m.Value("felix_queue_delivered_total", nil)
	require.GreaterOrEqual(t, delivered, 1.0)
	if runtime.GOOS == "linux" {
		avail, ok := m.Value("felix_storage_disk_available_bytes", nil)
		require.True(t, ok)
		size, _ := m.Value("felix_storage_disk_size_bytes", nil)
		require.Greater(t, size, 0.0)
		require.LessOrEqual(t, avail, size)
	}
	syncs := m["felix_commit_sync_latency_seconds"].Metric[0].Histogram
	require.NotZero(t, syncs.GetSampleCount())
	require.Equal(t, 1e-5, syncs.Bucket[0].GetUpperBound(), "plain bounds, not powers of two in nanoseconds")
}
