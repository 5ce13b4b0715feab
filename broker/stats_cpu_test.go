package broker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/fanout"
)

// /debug/felix/stats carries what felixtrace needs to compute rates from two
// scrapes: cumulative CPU per thread and for the machine, each durable
// shard's group commit, and each subscriber queue's depth, capacity and
// drops. The JSON names are an interface (felixtrace, dashboards).
func TestStatsCarryCPUCommitAndQueueAccounts(t *testing.T) {
	durable := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "orders"},
		Shards: 1, Durable: true, Fsync: "on_commit"}
	h := startBroker(t, broker.Config{DataDir: t.TempDir()}, demo, durable)
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()

	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	sub, err := c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{})
	require.NoError(t, err)
	pub, err := c.NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, pub.Publish(ctx, []byte("x")))
	}
	_, err = sub.Next(ctx)
	require.NoError(t, err)

	code, body := do(t, srv, "GET", "/debug/felix/stats", "")
	require.Equal(t, http.StatusOK, code)
	var st broker.Stats
	require.NoError(t, json.Unmarshal([]byte(body), &st))

	// Commit: only the durable shard has an account, and on_commit acks
	// waited for syncs.
	require.Len(t, st.Streams, 2)
	for _, s := range st.Streams {
		cs := s.Shards[0].Commit
		if !s.Durable {
			require.Nil(t, cs, "ephemeral shard %s has a commit account", s.Stream)
			continue
		}
		require.NotNil(t, cs)
		require.GreaterOrEqual(t, cs.Syncs, uint64(5), "five acked on_commit publishes, one at a time")
		require.Equal(t, uint64(5), cs.Records)
		require.Equal(t, cs.Syncs, cs.WaitersPerSync.Count)
		require.Positive(t, cs.SyncLatency.P99)
		require.GreaterOrEqual(t, cs.SyncLatency.P99, cs.SyncLatency.P50)
		require.Equal(t, cs.SyncLatency.Count, cs.SyncLatency.Snapshot().Count)
		require.Equal(t, cs.SyncLatency.P99, cs.SyncLatency.Snapshot().Quantile(0.99), "buckets survive the JSON round trip")
	}

	// Queue: the subscriber's depth, drops, capacity and policy.
	require.Len(t, st.Connections, 1)
	require.Len(t, st.Connections[0].Subscriptions, 1)
	q := st.Connections[0].Subscriptions[0]
	require.Equal(t, fanout.DefaultCapacity, q.Capacity)
	require.Equal(t, "catch_up", q.Policy, "a durable stream's subscriber catches up from the log")

	// CPU: cumulative, per thread, so a client computes its own rates.
	if runtime.GOOS != "linux" {
		require.Nil(t, st.CPU)
		require.NotEmpty(t, st.CPUUnavailable)
		return
	}
	require.NotNil(t, st.CPU, st.CPUUnavailable)
	require.Empty(t, st.CPUUnavailable)
	require.NotEmpty(t, st.CPU.Threads)
	require.Positive(t, st.CPU.Process.User+st.CPU.Process.System)
	require.Positive(t, st.CPU.System.Total.Idle+st.CPU.System.Total.User)
	require.NotEmpty(t, st.CPU.System.CPUs)

	requireStatsJSONNames(t, body)
}

// requireStatsJSONNames checks the names clients such as felixtrace read.
func requireStatsJSONNames(t *testing.T, body string) {
	t.Helper()
	var raw struct {
		CPU struct {
			Threads []map[string]any `json:"threads"`
			System  struct {
				Total map[string]any `json:"total"`
			} `json:"system"`
		} `json:"cpu"`
		Streams []struct {
			Shards []struct {
				Commit map[string]any `json:"commit"`
			} `json:"shard_stats"`
		} `json:"streams"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &raw))
	for _, k := range []string{"tid", "name", "user_ns", "system_ns", "start_ns"} {
		require.Contains(t, raw.CPU.Threads[0], k)
	}
	for _, k := range []string{"user_ns", "system_ns", "softirq_ns", "iowait_ns", "idle_ns"} {
		require.Contains(t, raw.CPU.System.Total, k)
	}
	var commitKeys map[string]any
	for _, s := range raw.Streams {
		if c := s.Shards[0].Commit; c != nil {
			commitKeys = c
		}
	}
	for _, k := range []string{"syncs", "waiters_per_sync", "records_per_sync", "sync_latency_ns"} {
		require.Contains(t, commitKeys, k)
	}
}

// A client rebuilds commit's histogram from the JSON to take the quantiles
// of an interval; buckets beyond commit's (a newer broker) fold into the last.
func TestHistogramStatsSnapshot(t *testing.T) {
	var h commit.Histogram
	for _, v := range []uint64{0, 1, 3, 900, 1 << 20} {
		h.Record(v)
	}
	want := h.Snapshot()
	hs := broker.HistogramStats{Count: want.Count, Sum: want.Sum, Buckets: want.Buckets[:22]}
	require.Equal(t, want, hs.Snapshot())

	hs = broker.HistogramStats{Count: 2, Buckets: make([]uint64, commit.HistogramBuckets+2)}
	hs.Buckets[commit.HistogramBuckets-1], hs.Buckets[commit.HistogramBuckets+1] = 1, 1
	require.Equal(t, uint64(2), hs.Snapshot().Buckets[commit.HistogramBuckets-1])
}
