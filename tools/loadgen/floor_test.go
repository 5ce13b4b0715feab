package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// With --floor each round is put next to a bare quic-go round trip to a
// child process: the table and the JSON carry the ratios, and the summary
// spreads them over rounds.
func TestFloorPrintsTheRatioToABareRoundTrip(t *testing.T) {
	tb := startBroker(t, latencyBroker)
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	res := runCLI(t, tb.args("--profile", "latency", "--count", "200", "--warmup", "20ms",
		"--floor", "--repeat", "2", "--json", jsonFile)...)
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	require.Contains(t, res.stdout, "ack ÷ bare p50")
	require.Contains(t, res.stdout, "delivery − ack p50 µs")

	raw, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	var out Result
	require.NoError(t, json.Unmarshal(raw, &out))
	requireExact(t, out)
	for _, r := range out.Rounds {
		require.NotNil(t, r.Floor, "round %d", r.Round)
		require.Positive(t, r.Floor.Count)
		require.Positive(t, r.Floor.P50)
		require.Positive(t, r.Floor.AckP50)
		require.NotNil(t, r.Floor.DeliveryOverAck)
		require.Positive(t, r.Floor.BrokerCPU, "the test broker serves /debug/felix/stats")
	}
	require.NotNil(t, out.Summary.FloorAckP50)
}

// --floor compares acked publishes.
func TestFloorNeedsAckedPublishes(t *testing.T) {
	tb := startBroker(t, latencyBroker)
	res := runCLI(t, tb.args("--ack", "none", "--floor")...)
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "--floor compares acked publishes")
}
