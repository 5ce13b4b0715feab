package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUndersizedDecision(t *testing.T) {
	absorb := 2 * connAbsorb(1, defaultStreamWin, defaultConnWin) // 1 publisher, 1 subscriber
	require.EqualValues(t, 32<<20, absorb)
	require.False(t, undersized(1<<40, absorb), "a terabyte is not undersized")
	require.False(t, undersized(4*absorb, absorb))
	require.True(t, undersized(4*absorb-1, absorb))
	require.True(t, undersized(1<<20, absorb))
	// The connection window caps a connection with many streams.
	require.EqualValues(t, defaultConnWin, connAbsorb(64, defaultStreamWin, defaultConnWin))

	// Only throughput runs are judged.
	cfg := Config{Profile: "latency", Publishers: 1, StreamWindow: defaultStreamWin, ConnWindow: defaultConnWin}
	r := &round{cfg: &cfg, streams: []streamInfo{{Name: "s", Shards: 1}}}
	require.False(t, r.transportCheck(1).Undersized)
	cfg.Profile = "throughput"
	require.True(t, r.transportCheck(1).Undersized)
	require.False(t, r.transportCheck(1<<40).Undersized)
	// Slow subscribers with --slow-window count with their own windows.
	cfg.SlowWindow = 64 << 10
	r.subs = []*subWorker{{slow: true}}
	require.EqualValues(t, 16<<20+64<<10, r.absorbBytes())
}
