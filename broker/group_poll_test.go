package broker_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

// docs/design.md, "Semantics", queue: a poison record (nacked every time)
// becomes a dead letter after the group's max attempts while the rest of
// the shard flows past it; redrive puts it back with fresh attempts, and
// discard drops one.
func TestGroupPoisonRecordBecomesADeadLetter(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "on_commit"))
	ctx := ctxT(t, 30*time.Second)
	publishJobs(t, ctx, h, "jobs", 10)
	g, err := h.dial(t).OpenGroup(ctx, "default", "jobs", "workers")
	require.NoError(t, err)

	done := map[uint64]bool{}
	attempts := 0
	for len(done) < 9 || attempts < 3 {
		recs, err := g.Poll(ctx, client.PollOptions{Max: 4, Wait: time.Second, MaxAttempts: 3})
		require.NoError(t, err)
		for _, r := range recs {
			if r.Offset == 4 { // the poison record
				attempts++
				require.Equal(t, uint64(attempts), r.Attempts)
				require.NoError(t, g.Nack(ctx, 0, r.Offset, client.NackOptions{Attempts: r.Attempts}))
				continue
			}
			require.NoError(t, g.Ack(ctx, 0, r.Offset))
			done[r.Offset] = true
		}
	}
	require.Equal(t, 3, attempts, "delivered max_attempts times, no more")
	dead, err := g.DeadLetters(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []uint64{4}, dead)
	info, err := g.Describe(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, client.GroupInfo{Committed: 10, Exists: true, Tail: 10, DeadLetters: 1, MaxAttempts: 3}, info)

	require.NoError(t, g.Redrive(ctx, 0, 4))
	recs, err := g.Poll(ctx, client.PollOptions{Max: 4})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, uint64(4), recs[0].Offset)
	require.Equal(t, uint64(1), recs[0].Attempts, "a redriven record has its attempts afresh")
	require.NoError(t, g.DeadLetter(ctx, 0, 4))
	require.NoError(t, g.Discard(ctx, 0, 4))
	dead, err = g.DeadLetters(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, dead)

	err = g.Discard(ctx, 0, 4)
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, wire.CodeInvalidRequest, be.Err.Code)
}

// Claim control: a delayed nack keeps a record from everyone until the
// delay ends; an extension keeps a claim past its visibility; a claim
// that lapsed cannot be extended (stale_claim, fatal).
func TestGroupClaimControl(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 30*time.Second)
	publishJobs(t, ctx, h, "jobs", 2)
	g, err := h.dial(t).OpenGroup(ctx, "default", "jobs", "w")
	require.NoError(t, err)

	recs, err := g.Poll(ctx, client.PollOptions{Max: 2, Visibility: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	granted, err := g.Extend(ctx, 0, 0, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, time.Minute, granted)
	nacked := time.Now()
	require.NoError(t, g.Nack(ctx, 0, 1, client.NackOptions{Delay: 500 * time.Millisecond, Attempts: 1}))

	// Offset 1 comes back after its delay, offset 0 stays claimed.
	recs, err = g.Poll(ctx, client.PollOptions{Max: 2, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, uint64(1), recs[0].Offset)
	require.Equal(t, uint64(2), recs[0].Attempts)
	require.GreaterOrEqual(t, time.Since(nacked), 500*time.Millisecond)

	_, err = g.Extend(ctx, 0, 1, 1, time.Minute)
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, wire.CodeStaleClaim, be.Err.Code)
	require.Equal(t, wire.Fatal, be.Err.Retry)

	info, err := g.Describe(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.InFlight)
	require.False(t, info.Exists && info.Committed > 0)
}

// Seek, describe and delete: a new group created at the tail with if_new
// sees only later records; delete forgets it.
func TestGroupSeekDescribeDelete(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 30*time.Second)
	publishJobs(t, ctx, h, "jobs", 5)
	g, err := h.dial(t).OpenGroup(ctx, "default", "jobs", "late")
	require.NoError(t, err)

	info, err := g.Describe(ctx, 0)
	require.NoError(t, err)
	require.False(t, info.Exists)
	require.Equal(t, uint64(5), info.Tail)
	pos, moved, err := g.Seek(ctx, 0, wire.Start{Kind: wire.StartLatest}, true)
	require.NoError(t, err)
	require.True(t, moved)
	require.Equal(t, uint64(5), pos)
	pos, moved, err = g.Seek(ctx, 0, wire.Start{Kind: wire.StartEarliest}, true)
	require.NoError(t, err)
	require.False(t, moved, "if_new leaves an existing group where it is")
	require.Equal(t, uint64(5), pos)
	recs, err := g.Poll(ctx, client.PollOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, recs)

	publishJobs(t, ctx, h, "jobs", 1)
	recs, err = g.Poll(ctx, client.PollOptions{Max: 10, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, uint64(5), recs[0].Offset)

	_, _, err = g.Seek(ctx, 0, wire.Start{Kind: wire.StartOffset, Offset: 99}, false)
	require.Error(t, err)
	existed, err := g.Delete(ctx, 0)
	require.NoError(t, err)
	require.True(t, existed)
	info, err = g.Describe(ctx, 0)
	require.NoError(t, err)
	require.False(t, info.Exists)
	recs, err = g.Poll(ctx, client.PollOptions{Max: 10})
	require.NoError(t, err)
	require.Len(t, recs, 6, "a deleted group starts afresh at offset 0")
}

// Member reclaim: a member that comes back on a new connection takes its
// claims back first, each as another attempt.
func TestGroupMemberReclaim(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "periodic"))
	ctx := ctxT(t, 30*time.Second)
	publishJobs(t, ctx, h, "jobs", 4)
	first := h.dial(t)
	g1, err := first.OpenGroup(ctx, "default", "jobs", "w")
	require.NoError(t, err)
	recs, err := g1.Poll(ctx, client.PollOptions{Max: 2, Consumer: "worker-1", Visibility: time.Minute})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.NoError(t, first.Close())

	g2, err := h.dial(t).OpenGroup(ctx, "default", "jobs", "w")
	require.NoError(t, err)
	recs, err = g2.Poll(ctx, client.PollOptions{Max: 3, Consumer: "worker-1", Reclaim: true})
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, strconv.FormatUint(r.Offset, 10)+"/"+strconv.FormatUint(r.Attempts, 10))
	}
	require.Equal(t, []string{"0/2", "1/2", "2/1"}, got)
}

// A broker without durable storage advertises no consumer groups, and a
// client refuses to open one there.
func TestGroupNeedsDurableStorage(t *testing.T) {
	h := serveBroker(t, broker.Config{})
	_, err := h.dial(t).OpenGroup(ctxT(t, 10*time.Second), "default", "jobs", "w")
	require.True(t, errors.Is(err, client.ErrNotNegotiated), "%v", err)
}
