package main

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
)

// restartKilled kills bp with SIGKILL and starts a broker on the same data
// directory.
func restartKilled(t *testing.T, bp *brokerProcess, env []string) *brokerProcess {
	t.Helper()
	require.NoError(t, bp.cmd.Process.Signal(syscall.SIGKILL))
	<-bp.exited
	return startBrokerProcess(t, env...)
}

func openJobs(t *testing.T, ctx context.Context, bp *brokerProcess) *client.Group {
	t.Helper()
	g, err := bp.dial(t).OpenGroup(ctx, "default", "jobs", "workers")
	require.NoError(t, err)
	return g
}

// docs/design.md, "Semantics", queue, with a real broker process: a poison
// record (nacked every time) becomes a dead letter after the group's max
// attempts while every other record is acked; the dead letter, the
// position and a redrive each survive kill -9 of the broker.
func TestGroupPoisonRecordSurvivesKill9(t *testing.T) {
	env := []string{"FELIX_DATA_DIR=" + t.TempDir(), "FELIX_STREAMS=t1/default/jobs:1:on_commit"}
	bp := startBrokerProcess(t, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pub, err := bp.dial(t).NewPublisher(ctx, "default", "jobs")
	require.NoError(t, err)
	const n, poison = 20, 7
	for i := range n {
		require.NoError(t, pub.Publish(ctx, []byte(strconv.Itoa(i))))
	}

	g := openJobs(t, ctx, bp)
	acked, attempts := 0, 0
	for acked < n-1 || attempts < 3 {
		recs, err := g.Poll(ctx, client.PollOptions{Max: 8, Wait: time.Second, MaxAttempts: 3})
		require.NoError(t, err)
		for _, r := range recs {
			if r.Offset == poison {
				attempts++
				require.NoError(t, g.Nack(ctx, 0, r.Offset, client.NackOptions{}))
				continue
			}
			require.NoError(t, g.Ack(ctx, 0, r.Offset))
			acked++
		}
	}
	requireGroup(t, ctx, g, []uint64{poison}, n)

	bp = restartKilled(t, bp, env)
	g = openJobs(t, ctx, bp)
	requireGroup(t, ctx, g, []uint64{poison}, n)
	recs, err := g.Poll(ctx, client.PollOptions{Max: 8})
	require.NoError(t, err)
	require.Empty(t, recs, "nothing owed: the dead letter is finished")

	require.NoError(t, g.Redrive(ctx, 0, poison))
	bp = restartKilled(t, bp, env)
	g = openJobs(t, ctx, bp)
	requireGroup(t, ctx, g, nil, n)
	recs, err = g.Poll(ctx, client.PollOptions{Max: 8})
	require.NoError(t, err)
	require.Len(t, recs, 1, "the redriven record is owed again after the crash")
	require.Equal(t, uint64(poison), recs[0].Offset)
	require.Equal(t, strconv.Itoa(poison), string(recs[0].Payload))
	require.NoError(t, g.Ack(ctx, 0, poison))

	bp = restartKilled(t, bp, env)
	g = openJobs(t, ctx, bp)
	requireGroup(t, ctx, g, nil, n)
	recs, err = g.Poll(ctx, client.PollOptions{Max: 8})
	require.NoError(t, err)
	require.Empty(t, recs)
}

func requireGroup(t *testing.T, ctx context.Context, g *client.Group, dead []uint64, committed uint64) {
	t.Helper()
	got, err := g.DeadLetters(ctx, 0)
	require.NoError(t, err)
	if dead == nil {
		require.Empty(t, got)
	} else {
		require.Equal(t, dead, got)
	}
	info, err := g.Describe(ctx, 0)
	require.NoError(t, err)
	require.True(t, info.Exists)
	require.Equal(t, committed, info.Committed)
	require.Equal(t, uint32(3), info.MaxAttempts, "the group's bound is kept with its state")
}
