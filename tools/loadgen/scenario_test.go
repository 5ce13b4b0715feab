package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// runScenarioT runs a scenario against tb and requires every check to hold.
func runScenarioT(t *testing.T, tb *testBroker, extra ...string) ScenarioResult {
	t.Helper()
	res, err := runScenario(ctxT(t), tb.config(t, extra...))
	require.NoError(t, err)
	requireChecks(t, res)
	return res
}

// requireChecks is the scenarios' accounting contract: every check holds,
// nothing errored, in every round.
func requireChecks(t *testing.T, res ScenarioResult) {
	t.Helper()
	require.NotEmpty(t, res.Rounds)
	for _, r := range res.Rounds {
		require.Empty(t, r.Errors, "round %d", r.Round)
		require.NotEmpty(t, r.Checks, "round %d", r.Round)
		for _, c := range r.Checks {
			require.True(t, c.OK, "round %d: %s: got %d, want %d", r.Round, c.Name, c.Got, c.Want)
		}
	}
	require.Zero(t, res.Summary.ChecksFailed)
	require.Zero(t, res.Summary.Errors)
}

func op(t *testing.T, r ScenarioRound, name string) OpResult {
	t.Helper()
	for _, o := range r.Ops {
		if o.Op == name {
			return o
		}
	}
	t.Fatalf("round %d has no op %q: %+v", r.Round, name, r.Ops)
	return OpResult{}
}

func TestScenarioCLIWritesTableAndJSON(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	res := runCLI(t, tb.args("--scenario", "cache", "--count", "50", "--warmup", "0", "--repeat", "2", "--json", jsonFile)...)
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	require.Contains(t, res.stdout, "felix-loadgen: scenario cache: cache loadgen-cache-ephemeral (ephemeral), op putget, 1 worker × 16 keys each, value 256 B, 50 iterations")
	require.Contains(t, res.stdout, "over 2 rounds:")
	require.Contains(t, res.stdout, "gets not returning the worker's last put")
	raw, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	var out ScenarioResult
	require.NoError(t, json.Unmarshal(raw, &out))
	requireChecks(t, out)
	require.Equal(t, "cache", out.Scenario)
	require.Len(t, out.Rounds, 2)
	require.Len(t, out.Summary.Ops, 2)
	require.NotNil(t, out.Summary.Ops[0].P50)
}

// An interrupt ends the measured phase early; the round still reports, with
// its checks, and says it was interrupted. The interrupt comes with the
// first progress line, so it always lands in the measured phase, however
// slow connecting is.
func TestScenarioInterruptStillReports(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	ctx, cancel := context.WithCancel(ctxT(t))
	cfg := tb.config(t, "--scenario", "counter", "--workers", "2", "--duration", "20s", "--warmup", "0", "--repeat", "3")
	cfg.Log = writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("counter_add")) {
			cancel()
		}
		return len(p), nil
	})
	res, err := runScenario(ctx, cfg)
	require.NoError(t, err)
	requireChecks(t, res)
	require.True(t, res.Interrupted)
	require.Len(t, res.Rounds, 1)
	require.True(t, res.Rounds[0].Interrupted)
	require.Positive(t, res.Rounds[0].Ops[0].Count)
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
