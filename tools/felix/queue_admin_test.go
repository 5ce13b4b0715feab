package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

func runQueueAdminT(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := queue(ctxT(t), args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// felix queue describe, dead-letters, redrive and seek on a group whose
// record 1 became a dead letter.
func TestQueueAdminCommands(t *testing.T) {
	tb := startBrokerWith(t, broker.Config{DataDir: t.TempDir()}, broker.StreamSpec{
		StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"}, Shards: 1, Durable: true,
	})
	requireSummary(t, runPubT(t, "", tb.args("--stream", "jobs", "--ack", "--count", "3", "job")...), "3", "9")
	ctx := ctxT(t)
	c, err := client.Dial(ctx, tb.addr, client.Config{Tenant: "t1", Token: "dev", TLS: tb.bt.ClientTLS})
	require.NoError(t, err)
	defer c.Close()
	g, err := c.OpenGroup(ctx, "default", "jobs", "g")
	require.NoError(t, err)
	recs, err := g.Poll(ctx, client.PollOptions{Max: 3, MaxAttempts: 1})
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.NoError(t, g.Ack(ctx, 0, 0))
	require.NoError(t, g.Nack(ctx, 0, 1, client.NackOptions{}))
	require.NoError(t, g.Ack(ctx, 0, 2))

	args := func(op string, extra ...string) []string {
		return append([]string{op}, tb.args(append([]string{"--stream", "jobs", "--group", "g"}, extra...)...)...)
	}
	r := runQueueAdminT(t, args("describe")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "shard=0 committed=3 tail=3 lag=0 in_flight=0 owed=0 dead_letters=1 max_attempts=1\n", r.stdout)
	r = runQueueAdminT(t, args("dead-letters")...)
	require.Equal(t, "1\n", r.stdout, r.stderr)
	r = runQueueAdminT(t, args("dead-letters", "--json")...)
	require.JSONEq(t, `{"offset":1}`, r.stdout, r.stderr)
	r = runQueueAdminT(t, args("describe", "--json")...)
	require.JSONEq(t, `{"shard":0,"committed":3,"tail":3,"lag":0,"in_flight":0,"owed":0,"dead_letters":1,"max_attempts":1}`, r.stdout, r.stderr)
	r = runQueueAdminT(t, args("redrive", "--all")...)
	require.Equal(t, "redriven 1\n", r.stdout, r.stderr)
	r = runQueueAdminT(t, args("describe")...)
	require.Equal(t, "shard=0 committed=3 tail=3 lag=0 in_flight=0 owed=1 dead_letters=0 max_attempts=1\n", r.stdout, r.stderr)
	r = runQueueAdminT(t, args("seek", "--to", "earliest")...)
	require.Equal(t, "position=0 moved=true\n", r.stdout, r.stderr)
	r = runQueueAdminT(t, args("seek", "--time", time.Now().Add(time.Hour).Format(time.RFC3339))...)
	require.Equal(t, "position=3 moved=true\n", r.stdout, r.stderr)
	r = runQueueAdminT(t, args("seek", "--to", "1", "--if-new")...)
	require.Equal(t, "position=3 moved=false\n", r.stdout, r.stderr)

	r = runQueueAdminT(t, args("redrive")...)
	require.Equal(t, exitUsage, r.code)
	r = runQueueAdminT(t, args("seek")...)
	require.Equal(t, exitUsage, r.code)
	r = runQueueAdminT(t, args("seek", "--to", "first")...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--to \"first\" is not earliest, latest or an offset")
	r = runQueueAdminT(t, args("redrive", "7")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "not a dead letter")
}
