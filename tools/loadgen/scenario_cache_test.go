package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// Cache: every get after a put of the same key by the same worker
// returns that value, under each --op, with workers sharing the cache.
func TestCacheScenarioGetsReturnTheWorkersLastPut(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	for _, o := range []string{"putget", "get", "put", "mixed"} {
		t.Run(o, func(t *testing.T) {
			res := runScenarioT(t, tb, "--scenario", "cache", "--op", o, "--workers", "3", "--keys", "5",
				"--count", "120", "--warmup", "0", "--value-size", "64")
			r := res.Rounds[0]
			switch o {
			case "putget":
				require.EqualValues(t, 120, op(t, r, "put").Count)
				require.EqualValues(t, 120, op(t, r, "get").Count)
			case "get":
				require.EqualValues(t, 120, op(t, r, "get").Count)
				require.EqualValues(t, 15, r.Counts["puts"]) // the preload, not measured
			case "put":
				require.EqualValues(t, 120, op(t, r, "put").Count)
				require.Len(t, r.Ops, 1)
			case "mixed":
				require.EqualValues(t, 120, op(t, r, "put").Count+op(t, r, "get").Count)
			}
			for _, o := range r.Ops {
				require.Positive(t, o.PerS)
				require.LessOrEqual(t, o.Latency.P50, o.Latency.P99)
			}
		})
	}
}

func TestCacheScenarioOnADurableOnCommitCache(t *testing.T) {
	tb := startBroker(t, broker.Config{DataDir: t.TempDir()})
	res := runScenarioT(t, tb, "--scenario", "cache", "--durable", "--fsync", "on_commit", "--workers", "2",
		"--count", "40", "--warmup", "0")
	require.Equal(t, "loadgen-cache-on_commit", res.Config.Cache)
	require.EqualValues(t, 40, op(t, res.Rounds[0], "get").Count)

	// Asked for again as ephemeral under the same name: used as it is.
	res = runScenarioT(t, tb, "--scenario", "cache", "--cache", "loadgen-cache-on_commit", "--count", "5", "--warmup", "0")
	require.Equal(t, []string{"cache loadgen-cache-on_commit exists, durable on_commit; using it as it is"}, res.Notes)
}
