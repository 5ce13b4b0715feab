package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// Queues: K consumers of one group drain a durable on_commit
// stream; every record is acked, none twice without a redelivery, and the
// group position ends at the record count.
func TestQueueScenarioAcksEveryRecordOnce(t *testing.T) {
	tb := startBroker(t, broker.Config{DataDir: t.TempDir()})
	for _, p := range []string{"0", "4KiB"} {
		t.Run(p, func(t *testing.T) {
			res := runScenarioT(t, tb, "--scenario", "queue", "--payload", p, "--consumers", "3", "--count", "500")
			r := res.Rounds[0]
			require.True(t, res.Config.Durable)
			require.Equal(t, "on_commit", res.Config.Fsync)
			require.EqualValues(t, 500, op(t, r, "drain").Count)
			require.Positive(t, op(t, r, "drain").PerS)
			require.Len(t, r.Checks, 3) // the group position check needs the admin stats
			require.Zero(t, r.Counts["foreign records"])
		})
	}
}

// With --shards the records go to every shard and the group drains them
// all; the group positions, summed over the shards, end at the count.
func TestQueueScenarioOverShards(t *testing.T) {
	tb := startBroker(t, broker.Config{DataDir: t.TempDir()})
	res := runScenarioT(t, tb, "--scenario", "queue", "--shards", "3", "--consumers", "2", "--count", "500")
	r := res.Rounds[0]
	require.Equal(t, 3, res.Config.Shards)
	require.EqualValues(t, 500, op(t, r, "drain").Count)
	require.Len(t, r.Checks, 3)
	require.Zero(t, r.Counts["foreign records"])
}

func TestQueueLayoutFollowsThePublishBatches(t *testing.T) {
	l := layoutFor(500, 64, 3) // batches 64 ×7 + 52 in turn: 0,3,6 | 1,4,7 (the 52) | 2,5
	require.Equal(t, []int64{192, 180, 128}, l.count)
	require.Equal(t, []int64{0, 192, 372}, l.base)
	require.EqualValues(t, 372+127, l.index(client.QueueRef{Shard: 2, Offset: 127}))
	require.EqualValues(t, -1, l.index(client.QueueRef{Shard: 2, Offset: 128}))
	require.EqualValues(t, -1, l.index(client.QueueRef{Shard: 3}))
}

func TestQueueScenarioNeedsADurableBroker(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	res := runCLI(t, tb.args("--scenario", "queue", "--count", "10")...)
	require.Equal(t, exitFail, res.code)
	require.Contains(t, res.stderr, "felix-loadgen: round 1: create stream lg")
}
