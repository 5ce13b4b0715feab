package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestScenarioFlagValidationErrorsArePrecise(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "kv"}, `--scenario "kv": want pubsub, cache, counter, watch, roster, queue`},
		{[]string{"--scenario", "cache", "--op", "scan"}, `--op "scan": want putget, get, put or mixed`},
		{[]string{"--scenario", "cache", "--value-size", "8"}, "--value-size 8: want 16 to 1048576 (the value carries ids, a sequence and a send time)"},
		{[]string{"--scenario", "counter", "--keys", "0"}, "--keys 0: want at least 1"},
		{[]string{"--scenario", "watch", "--rate", "0"}, "--scenario watch needs a --rate (puts/s of the one writer)"},
		{[]string{"--scenario", "roster", "--duration", "5s"}, "--scenario roster counts (samples or records): pass --count, not --duration"},
		{[]string{"--scenario", "queue", "--consumers", "0"}, "--consumers 0: want at least 1"},
		{[]string{"--scenario", "cache", "--cache", "a/b"}, "--cache must not contain '/'"},
		{[]string{"--watchers", "50"}, "--watchers applies to --scenario watch, not pubsub"},
		{[]string{"--scenario", "roster", "--op", "get"}, "--op applies to --scenario cache, not roster"},
	}
	for _, c := range cases {
		_, err := parseFlags(caArgs(t, c.args...), &bytes.Buffer{})
		require.EqualError(t, err, c.want, "args %v", c.args)
	}
}

func TestScenarioDefaults(t *testing.T) {
	cfg, err := parseFlags(caArgs(t), &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, "pubsub", cfg.Scenario) // the existing behaviour

	cfg, err = parseFlags(caArgs(t, "--scenario", "queue"), &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, cfg.Durable)
	require.Equal(t, "on_commit", cfg.Fsync)
	require.EqualValues(t, defaultQueueRecords, cfg.Count)
	require.Zero(t, cfg.Duration)

	cfg, err = parseFlags(caArgs(t, "--scenario", "roster"), &bytes.Buffer{})
	require.NoError(t, err)
	require.EqualValues(t, defaultRosterSamples, cfg.Count)

	cfg, err = parseFlags(caArgs(t, "--scenario", "watch", "--durable"), &bytes.Buffer{})
	require.NoError(t, err)
	require.EqualValues(t, defaultWatchRate, cfg.Rate)
	require.Equal(t, 10*time.Second, cfg.Duration)
	require.Equal(t, "loadgen-cache-periodic", cfg.cacheName())
}
