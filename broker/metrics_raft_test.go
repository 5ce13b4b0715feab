package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
)

// The leader of a replicated shard counts the append messages it sends
// and the entries they carry, and every replica of an on_commit shard its
// log syncs, how long they took and the records they made durable, in /metrics and in
// /debug/felix/stats.
func TestRaftBatchingCounters(t *testing.T) {
	rc := startRaftCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead := rc.leader()
	p, err := rc.nodes[lead].dialWith(t, client.Config{TLS: rc.tls}).NewPublisher(ctx, "default", "rf3")
	require.NoError(t, err)
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = fmt.Appendf(nil, "r%d", i)
	}
	require.NoError(t, p.PublishShardAsync(0, batch).Wait(ctx))
	p.Close(ctx)

	// The counters move after the sends and syncs, not before the ack.
	shard := map[string]string{"stream": "rf3", "shard": "0"}
	require.Eventually(t, func() bool {
		m := scrape(t, rc.nodes[lead].b)
		value := func(name string, labels map[string]string) float64 {
			v, _ := m.Value(name, labels)
			return v
		}
		return value("felix_raft_append_messages_total", map[string]string{"empty": "false"}) > 0 &&
			value("felix_raft_append_entries_total", nil) >= 2*64 && // the batch went to both followers
			value("felix_raft_log_syncs_total", shard) > 0 &&
			value("felix_raft_log_synced_records_total", shard) >= 64 &&
			value("felix_raft_log_sync_seconds", nil) >= value("felix_raft_log_syncs_total", shard) // a histogram: its count
	}, 10*time.Second, 20*time.Millisecond)
	for i, h := range rc.nodes {
		require.Eventually(t, func() bool {
			r := h.b.Stats().Streams[0].Shards[0].Replica
			return r.Syncs > 0 && r.SyncedRecords >= 64
		}, 10*time.Second, 20*time.Millisecond, "broker %d", i)
	}
}
