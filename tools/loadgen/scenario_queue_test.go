package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// Issue 7, queues: K consumers of one group drain a durable on_commit
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

func TestQueueScenarioNeedsADurableBroker(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	res := runCLI(t, tb.args("--scenario", "queue", "--count", "10")...)
	require.Equal(t, exitFail, res.code)
	require.Contains(t, res.stderr, "felix-loadgen: round 1: create stream lg")
}
