package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/internal/testutil"
)

// The rolling restart test (docs/operations.md, "Rolling upgrade"): three
// broker processes hold the replicas of an RF=3 on_commit stream under
// paced idempotent publishers waiting for quorum acks and a subscriber
// resuming by offset. Each broker in turn gets SIGTERM (a leader hands its
// leadership to a caught up follower before it drains), is started again
// and is waited for until the leader counts it in sync. No publish may
// fail past its retries, and the history checker finds every acked batch
// once in every replica's log. The longest gap between two acks around
// each restart is logged (the figure docs/operations.md quotes); one
// manual `felix admin shard step-down` runs first, through the CLI.
//
// FELIX_ROLLING_ROUNDS sets the number of rounds of three restarts (make
// reliability runs 10); make test runs 1.

func TestRollingRestartLosesNoPublish(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three broker processes through restarts")
	}
	rounds := envCount(t, "FELIX_ROLLING_ROUNDS", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(60+40*rounds)*time.Second)
	defer cancel()
	rc := startReplicatedCluster(t, ctx)
	tl := &timeline{}
	rc.ccfg.Logger = tl.logger()
	stalls, disk := meterStalls(t), meterDisk(t, t.TempDir())
	h := rc.runPaced(ctx, 3, 5*time.Millisecond)
	h.awaitProgress(t, ctx, 20*time.Second, "the start")

	felix := testutil.GoBuild(t, "github.com/felixmq/felix/tools/felix")
	rc.awaitInSync(ctx)
	lead := rc.leader(ctx)
	from := time.Now()
	to := rc.stepDownCLI(t, ctx, felix)
	require.NotEqual(t, rc.brokers[lead].id, to, "felix admin shard step-down moved the leadership")
	h.awaitProgress(t, ctx, 20*time.Second, "the step-down")
	gap, at := h.maxGap(from, time.Now())
	t.Logf("felix admin shard step-down: %s → %s, longest ack gap %v (from %s)", rc.brokers[lead].id, to, gap.Round(time.Millisecond), clock(at))

	start := time.Now()
	// Per restart: the longest ack gap from SIGTERM to the exit (the
	// hand-off and the drain), and to the restarted broker in sync; the
	// longest stall of the test process and of the disk meanwhile, and
	// the gap less the disk's stall within it (own).
	type restart struct {
		round, broker                        int
		leader                               bool
		stopGap, gap, back, stall, disk, own time.Duration
	}
	var restarts []restart
	for round := range rounds {
		for i := range rc.brokers {
			rc.awaitInSync(ctx)
			wasLeader := rc.leader(ctx) == i
			from := time.Now()
			require.NoError(t, rc.brokers[i].term(), "broker %s exits cleanly on SIGTERM", rc.brokers[i].id)
			stopped := time.Now()
			if wasLeader {
				raw, err := os.ReadFile(rc.brokers[i].logPath())
				require.NoError(t, err)
				require.Regexp(t, `leadership handed over before draining.* handed=true`, string(raw),
					"the leader %s handed its leadership over on SIGTERM", rc.brokers[i].id)
			}
			rc.restart(i)
			rc.awaitInSync(ctx)
			h.awaitProgress(t, ctx, 20*time.Second, fmt.Sprintf("round %d, restart of %s", round+1, rc.brokers[i].id))
			r := restart{round: round + 1, broker: i, leader: wasLeader, back: time.Since(from)}
			r.stopGap, _ = h.maxGap(from, stopped)
			r.gap, at = h.maxGap(from, time.Now())
			r.stall, r.disk = stalls.longest(from, time.Now()), disk.longest(from, time.Now())
			r.own = max(0, r.gap-disk.longest(at, at.Add(r.gap)))
			restarts = append(restarts, r)
			t.Logf("round %d: %s (leader %t) SIGTERM at %s, stopped in %v, restarted and in sync after %v; longest ack gap until stopped %v, until in sync %v (from %s), %v beyond the disk's stall in it; the test process stalled up to %v, an fsync up to %v",
				r.round, rc.brokers[i].id, r.leader, clock(from), stopped.Sub(from).Round(time.Millisecond), r.back.Round(time.Millisecond),
				r.stopGap.Round(time.Millisecond), r.gap.Round(time.Millisecond), clock(at), r.own.Round(time.Millisecond), r.stall.Round(time.Millisecond), r.disk.Round(time.Millisecond))
			if r.gap >= explainGap {
				t.Logf("what was logged during that gap:\n%s", rc.explain(tl, at.Add(-50*time.Millisecond), at.Add(r.gap+50*time.Millisecond), 80))
			}
		}
	}
	overall, _ := h.maxGap(start, time.Now())
	res := rc.finish(ctx, h)

	var all, leaders, stops, stalled, disks, own []time.Duration
	perRound := make([]time.Duration, rounds)
	for _, r := range restarts {
		all, stops, stalled = append(all, r.gap), append(stops, r.stopGap), append(stalled, r.stall)
		disks, own = append(disks, r.disk), append(own, r.own)
		if r.leader {
			leaders = append(leaders, r.gap)
		}
		perRound[r.round-1] = max(perRound[r.round-1], r.gap)
	}
	t.Logf("rolling restart: %d rounds, %d restarts (%d of the leader); acked batches %d (records %d), failed 0, lost 0, duplicated 0; resends %d, reconnects %d; subscriber resumes %d",
		rounds, len(restarts), len(leaders), res.batches, 2*res.batches, res.resends, res.reconnects, h.resumes())
	t.Logf("longest ack gap per restart: %s; beyond the disk's stall in it: %s; of the leader's: %s; until stopped: %s; per round: %s; overall %v; "+
		"the test process's longest stall per restart: %s; the longest fsync per restart: %s", spread(all), spread(own), spread(leaders), spread(stops),
		spread(perRound), overall.Round(time.Millisecond), spread(stalled), spread(disks))
}

// explainGap is the ack gap from which the test logs what the clients and
// brokers logged during it: the hand-off goal is 500 ms.
const explainGap = 300 * time.Millisecond

// clock is t as the brokers' logs show it, to find what they did then.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// spread is "min/median/max" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	ds = slices.Sorted(slices.Values(ds))
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %v median %v max %v", r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]))
}

// awaitInSync waits until the leader counts all three replicas in sync
// and each has committed what the leader held when it was called (a
// restarted replica caught up, not only counted in sync from before its
// restart).
func (rc *replicatedCluster) awaitInSync(ctx context.Context) {
	rc.t.Helper()
	lead := rc.leader(ctx)
	var held uint64
	if r := rc.replica(lead); r != nil {
		held = r.LastIndex
	}
	for ctx.Err() == nil {
		synced := 0
		for i := range rc.brokers {
			r := rc.replica(i)
			if r != nil && r.Commit >= held {
				synced++
			}
			if r != nil && r.Role == "leader" && (len(r.InSync) < len(rc.brokers) || r.Transferee != "") {
				synced = -len(rc.brokers)
			}
		}
		if synced == len(rc.brokers) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	rc.t.Fatal("the replicas are not in sync")
}

// stepDownCLI runs felix admin shard step-down on the stream and returns
// the new leader it names.
func (rc *replicatedCluster) stepDownCLI(t *testing.T, ctx context.Context, felix string) string {
	tok := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tok, []byte(rc.ccfg.Token), 0o600))
	out, err := exec.CommandContext(ctx, felix, "admin", "shard", "step-down", "--controlplane", rc.cp.url, "--token-file", tok,
		"--tenant", "t1", "--stream", "rep", "--shard", "0").Output()
	var ee *exec.ExitError
	if err != nil && errors.As(err, &ee) {
		t.Fatalf("felix admin shard step-down: %v: %s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var ans broker.StepDownAnswer
	require.NoError(t, json.Unmarshal(out, &ans), string(out))
	require.NotEmpty(t, ans.Leader)
	return ans.Leader
}
