package main

import (
	"bytes"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

func runQueueT(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := queue(ctxT(t), append([]string{"consume"}, args...), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// `felix queue consume` without --ack leaves its records (up to
// --max-inflight are out to it) to the group,
// which redelivers them (count 1) to the next consumer; with --ack they are
// done.
func TestQueueConsumeRedeliversUnacked(t *testing.T) {
	tb := startBrokerWith(t, broker.Config{DataDir: t.TempDir()}, broker.StreamSpec{
		StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"}, Shards: 1, Durable: true,
	})
	requireSummary(t, runPubT(t, "", tb.args("--stream", "jobs", "--ack", "--count", "3", "job")...), "3", "9")
	r := runQueueT(t, tb.args("--stream", "jobs", "--group", "g", "--count", "2", "--max-inflight", "2")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0 0 0 job\n0 1 0 job\n", r.stdout)
	// The broker hands the records back when it sees the first consumer's
	// connection go; wait for that so the next consumer's order is fixed.
	require.Eventually(t, func() bool { return tb.b.Stats().Groups[0].Inflight == 0 }, 10*time.Second, time.Millisecond)
	r = runQueueT(t, tb.args("--stream", "jobs", "--group", "g", "--count", "3", "--ack")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0 0 1 job\n0 1 1 job\n0 2 0 job\n", r.stdout)
}

// Over a stream of two shards the consumer gets the records of both, each
// line naming its shard.
func TestQueueConsumeEveryShard(t *testing.T) {
	tb := startBrokerWith(t, broker.Config{DataDir: t.TempDir()}, broker.StreamSpec{
		StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"}, Shards: 2, Durable: true,
	})
	ctx := ctxT(t)
	set := flag.NewFlagSet("test", flag.ContinueOnError)
	f := addConnFlags(set)
	require.NoError(t, set.Parse(tb.args("--stream", "jobs")))
	require.NoError(t, f.check(set))
	c, err := f.dial(ctx, nil)
	require.NoError(t, err)
	defer c.Close()
	p, err := c.NewPublisher(ctx, "default", "jobs")
	require.NoError(t, err)
	for sh, job := range []string{"a", "b"} {
		require.NoError(t, p.PublishShardAsync(uint32(sh), [][]byte{[]byte(job)}).Wait(ctx))
	}
	r := runQueueT(t, tb.args("--stream", "jobs", "--group", "g", "--count", "2", "--ack")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	slices.Sort(lines)
	require.Equal(t, []string{"0 0 0 a", "1 0 0 b"}, lines)
}

func TestQueueConsumeErrors(t *testing.T) {
	tb := startBroker(t)
	r := runQueueT(t, tb.args("--group", "g", "--count", "1")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "felix queue consume: broker: invalid request: queue: stream t1/default/demo is not durable")
	for _, args := range [][]string{
		{"queue"},
		{"queue", "consume"},
		{"queue", "consume", "--group", "g", "extra"},
		{"queue", "consume", "--group", "g", "--count", "-1"},
	} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "felix queue", args)
	}
}
