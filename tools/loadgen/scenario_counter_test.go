package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// Counters: concurrent counter_adds on shared keys are neither
// lost nor applied twice: each key reads the sum of the acked deltas.
func TestCounterScenarioSumsMatchTheAckedDeltas(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	res := runScenarioT(t, tb, "--scenario", "counter", "--workers", "4", "--keys", "3", "--count", "400",
		"--warmup", "20ms", "--repeat", "2")
	for _, r := range res.Rounds {
		add := op(t, r, "counter_add")
		require.EqualValues(t, 400, add.Count)
		require.GreaterOrEqual(t, r.Counts["counter_adds acked"], uint64(400)) // plus the warm-up
		require.EqualValues(t, 3, op(t, r, "counter_get (read-back)").Count)
	}
}
