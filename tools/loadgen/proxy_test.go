package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// --via-proxy runs the load through the impairment proxy: with loss in both
// directions the run still accounts for every event, and the proxy reports
// what it dropped.
func TestViaProxy(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	file := filepath.Join(t.TempDir(), "r.json")
	r := runCLI(t, tb.args("--via-proxy", "--proxy-loss", "0.02", "--proxy-delay", "1ms",
		"--subscribers", "2", "--duration", "1s", "--warmup", "200ms", "--json", file)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "via impairment proxy")
	require.Regexp(t, `impairment proxy: relayed [1-9][0-9]*, dropped [1-9]`, r.stderr)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var res Result
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Zero(t, res.Summary.Unaccounted)

	bad := runCLI(t, tb.args("--via-proxy", "--proxy-loss", "1.5")...)
	require.Equal(t, exitUsage, bad.code)
	require.Contains(t, bad.stderr, "--proxy-loss 1.5: want a probability in [0, 1]")
}
