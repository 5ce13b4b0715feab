package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/segment"
)

// Operating a replicated cluster with broker processes (docs/operations.md):
// a lost broker replaced, a broker added. The control plane runs in the
// test process with short periods; the brokers are the real binary.

// replaceAfter is the tests' grace period before a lost member is
// replaced (60 s by default).
const replaceAfter = 2 * time.Second

// placement is the control plane's placement.
func (h *cpHarness) placement(t *testing.T) cluster.Placement {
	code, body := h.call(http.MethodGet, "/v1/placement", "", h.bootstrap)
	require.Equal(t, http.StatusOK, code, body)
	var p cluster.Placement
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	return p
}

// dirSize is the bytes of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	}))
	return n
}

// TestReplaceLostBroker: three brokers hold an RF=3 quorum stream under
// idempotent publishers and a resuming subscriber; once it holds
// FELIX_REPLACE_RECORDS records (default 20000), a follower is killed
// (kill -9) and its data directory deleted, and a fourth broker starts.
// After the lease and the grace period the control plane replaces the
// lost member by the new one, whose replica joins as a learner, catches
// up, is promoted, and the lost one is removed: the placement shows three
// in-sync voters again. The history checker then finds nothing acked lost
// or duplicated, and the three replicas' logs identical.
func TestReplaceLostBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four broker processes")
	}
	records := uint64(20000)
	if s := os.Getenv("FELIX_REPLACE_RECORDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "FELIX_REPLACE_RECORDS")
		records = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := startClusterControlPlaneWith(t, time.Hour, controlplane.PlacerConfig{ReplaceAfter: replaceAfter})
	rc := startReplicatedClusterOn(t, ctx, cp)
	h := rc.run(ctx, 2)
	lead := rc.leader(ctx)
	for r := rc.replica(lead); r == nil || r.LastIndex < records; r = rc.replica(lead) {
		require.NoError(t, ctx.Err(), "the stream did not reach %d records", records)
		time.Sleep(50 * time.Millisecond)
	}
	shardDir := func(cb *clusterBroker) string {
		return filepath.Join(cb.dir, "data", segment.ShardDirName("t1", "default", "rep", 0))
	}
	lost := (lead + 1) % 3
	size := dirSize(t, shardDir(rc.brokers[lead]))
	rc.brokers[lost].kill()
	killed := time.Now()
	require.NoError(t, os.RemoveAll(filepath.Join(rc.brokers[lost].dir, "data")))
	b4, p4 := rc.newBroker("b4")
	held := rc.replica(lead).LastIndex

	var survivors []string
	view := &replicatedCluster{t: t, cp: cp, ccfg: rc.ccfg}
	for i, cb := range rc.brokers {
		if i != lost {
			survivors = append(survivors, cb.id)
			view.brokers, view.proxies = append(view.brokers, cb), append(view.proxies, rc.proxies[i])
		}
	}
	view.brokers, view.proxies = append(view.brokers, b4), append(view.proxies, p4)
	want := slices.Sorted(slices.Values(append(survivors, "b4")))
	// The steps as the placement shows them, timed from the kill.
	steps := map[string]time.Duration{}
	step := func(name string, ok bool) {
		if _, seen := steps[name]; ok && !seen {
			steps[name] = time.Since(killed).Round(time.Millisecond)
		}
	}
	for {
		require.NoError(t, ctx.Err(), "not back to three in-sync replicas; steps %v", steps)
		a, _ := cluster.NewIndex(cp.placement(t)).Assignment(cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "rep"})
		step("under-replicated", a.UnderReplicated())
		step("replaced", slices.Contains(a.Replicas, "b4"))
		step("learner", slices.Contains(a.Learners, "b4"))
		step("promoted", slices.Contains(a.Voters, "b4"))
		if slices.Equal(a.Voters, want) && slices.Equal(a.InSync, want) && len(a.Learners) == 0 {
			step("in-sync", true)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("replace: %d records (%d bytes in the leader's shard directory) when b%d was lost; back to 3 in-sync replicas %v %v after the kill "+
		"(lease %v + grace %v); steps %v", held, size, lost+1, want, steps["in-sync"], e2eLease, replaceAfter, steps)
	require.Less(t, steps["under-replicated"], steps["replaced"])
	require.Less(t, steps["replaced"], steps["promoted"])
	res := view.finish(ctx, h)
	t.Logf("replace: acked batches %d (records %d); lost 0, duplicated 0; resends %d, reconnects %d; subscriber resumes %d",
		res.batches, 2*res.batches, res.resends, res.reconnects, h.resumes())
}
