package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/fanout"
)

// Keyed watch: every acked put reaches every watcher in order,
// delivered or reported dropped.
func TestWatchScenarioAccountsForEveryPut(t *testing.T) {
	tb := startBroker(t, latencyBroker)
	res := runScenarioT(t, tb, "--scenario", "watch", "--watchers", "5", "--rate", "2000", "--count", "200", "--warmup", "20ms")
	r := res.Rounds[0]
	require.Len(t, r.Watchers, 5)
	require.EqualValues(t, 200, op(t, r, "put").Count)
	require.EqualValues(t, 5*200, op(t, r, "put→delivery").Count)
	for _, w := range r.Watchers {
		require.Equal(t, w.Puts, w.Delivered+w.Dropped)
		require.Zero(t, w.Unaccounted)
		require.GreaterOrEqual(t, w.Puts, uint64(200))
	}
}

// A watcher queue of 2 events drops under a burst of 16 KiB puts; the
// drops arrive as gap reports and the accounting still closes. Whether a
// round drops depends on timing, so three rounds get the chance.
func TestWatchScenarioCountsGapReports(t *testing.T) {
	bcfg := latencyBroker
	bcfg.Queue = fanout.Config{Capacity: 2, Policy: fanout.DropNew}
	tb := startBroker(t, bcfg)
	count, rounds := "800", "3"
	if raceEnabled {
		count, rounds = "200", "1" // no drops to wait for (see raceEnabled); stay within ctxT
	}
	res := runScenarioT(t, tb, "--scenario", "watch", "--watchers", "3", "--rate", "100000", "--count", count,
		"--warmup", "0", "--value-size", "16384", "--repeat", rounds)
	var dropped uint64
	for _, r := range res.Rounds {
		dropped += r.Counts["dropped"]
		for _, w := range r.Watchers {
			require.Zero(t, w.Unaccounted)
			if w.Dropped > 0 {
				require.Positive(t, w.Gaps)
			}
		}
	}
	if !raceEnabled {
		require.Positive(t, dropped, "2-event queues behind 16 KiB puts must drop")
	}
}
