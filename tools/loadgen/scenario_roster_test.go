package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// Roster: a late joiner's snapshot is the true member set,
// members spread over several connections.
func TestRosterScenarioLateJoinerSeesEveryMember(t *testing.T) {
	tb := startBroker(t, broker.Config{})
	res := runScenarioT(t, tb, "--scenario", "roster", "--members", "150", "--count", "5", "--warmup", "0")
	r := res.Rounds[0]
	require.EqualValues(t, 5, op(t, r, "complete state").Count)
	require.EqualValues(t, 150, op(t, r, "join (set-up)").Count)
	require.EqualValues(t, 3, r.Counts["member connections"]) // 64 + 64 + 22
	require.EqualValues(t, 5, r.Counts["snapshots"])
	require.Len(t, r.Checks, 3) // with the broker's own member count
}
