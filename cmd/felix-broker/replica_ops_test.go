package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/internal/testutil"
	"github.com/felixmq/felix/segment"
)

// Operating a replicated cluster with broker processes (docs/operations.md):
// a lost broker replaced, a broker added. The control plane runs in the
// test process with short periods; the brokers are the real binary.

// replaceAfter is the tests' grace period before a lost member is
// replaced (60 s by default).
const replaceAfter = 2 * time.Second

// growWaitS bounds the wait for 9/9/9/9, seconds.
var growWaitS = 180

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

// TestGrowBalancesReplicas: three brokers hold a 12-shard RF=3 stream
// (36 replicas, 12 each) with FELIX_GROW_SHARD_BYTES (default 2 MiB) in
// each shard; a paced publisher measures acks for a while, then a fourth
// broker joins. The placer moves replicas to it, at most two shards at a
// time, until every broker holds 9; the leaders' catch-up traffic stays
// within FELIX_RAFT_CATCHUP_BYTES_PER_SEC (set low, so that the throttle
// decides the pace) plus its burst. The publish ack p99 during the moves
// is logged beside the one before them.
func TestGrowBalancesReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four broker processes")
	}
	const throttle = 512 << 10
	perShard := 2 << 20
	if s := os.Getenv("FELIX_GROW_SHARD_BYTES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "FELIX_GROW_SHARD_BYTES")
		perShard = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := startClusterControlPlaneWith(t, time.Hour, controlplane.PlacerConfig{MaxMoves: 2})
	// The throttle's burst is a frame and a MiB: smaller frames keep it
	// small beside the data moved, though a frame must still carry a raft
	// append (up to 1 MiB and a batch).
	const frame = 2 << 20
	rc := newReplicatedCluster(t, cp, "FELIX_RAFT_CATCHUP_BYTES_PER_SEC="+strconv.Itoa(throttle), "FELIX_MAX_FRAME_BYTES="+strconv.Itoa(frame))
	for _, id := range e2eIDs {
		cb, proxy := rc.newBroker(id)
		rc.brokers, rc.proxies = append(rc.brokers, cb), append(rc.proxies, proxy)
	}
	cp.mustCall(t, http.StatusCreated, http.MethodPost, "/v1/tenants/t1/namespaces/default/streams",
		`{"tenant":"t1","namespace":"default","stream":"grow","shards":12,"durable":true,"fsync":"periodic","replicas":3,"ack":"quorum"}`)
	// settle waits until every shard's group is its replica set, in
	// sync, and the sets give each broker want replicas.
	settle := func(d time.Duration, want map[string]int) {
		t.Helper()
		var p cluster.Placement
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			p = cp.placement(t)
			got := map[string]int{}
			done := len(p.Assignments) == 12
			for _, a := range p.Assignments {
				done = done && a.AllInSync() && !a.Moving()
				for _, id := range a.Replicas {
					got[id]++
				}
			}
			if done && maps.Equal(got, want) {
				return
			}
		}
		for _, a := range p.Assignments {
			t.Logf("%s: replicas %v voters %v learners %v in_sync %v", a.Shard, a.Replicas, a.Voters, a.Learners, a.InSync)
		}
		for _, cb := range rc.brokers {
			raw, _ := os.ReadFile(cb.logPath())
			var lines []string
			for _, l := range strings.Split(string(raw), "\n") {
				if strings.Contains(l, "replica") {
					lines = append(lines, l)
				}
			}
			t.Logf("== %s: %s", cb.id, strings.Join(lines[max(0, len(lines)-15):], "\n"))
			for _, st := range cb.fullStats(t).Streams {
				for i, sh := range st.Shards {
					if r := sh.Replica; r != nil && r.Role == "leader" {
						t.Logf("%s#%d on %s: term %d voters %v learners %v in_sync %v transferee %q commit %d applied %d last %d", st.Stream, i, cb.id,
							r.Term, r.Voters, r.Learners, r.InSync, r.Transferee, r.Commit, r.Applied, r.LastIndex)
					}
				}
			}
		}
		t.Fatalf("not settled at %v within %v", want, d)
	}
	settle(time.Minute, map[string]int{"b1": 12, "b2": 12, "b3": 12})
	g := newGrowLoad(t, ctx, rc)
	g.fill(perShard)

	g.start()
	time.Sleep(5 * time.Second) // the baseline: the same load, no move
	before := g.cut()
	b4, _ := rc.newBroker("b4")
	rc.brokers = append(rc.brokers, b4)
	added := time.Now()
	caught, throttledBefore := rc.catchUp()
	settle(time.Duration(growWaitS)*time.Second, map[string]int{"b1": 9, "b2": 9, "b3": 9, "b4": 9})
	took := time.Since(added)
	during := g.cut()
	g.stop()
	moved, throttled := rc.catchUp()
	var total float64
	for id, n := range moved {
		n -= caught[id]
		total += n
		// Each leader's catch-up appends pass its throttle: at most the
		// rate over the moves plus the burst.
		require.LessOrEqual(t, n, float64(throttle)*took.Seconds()+float64(frame+1<<20), "%s sent %.0f catch-up bytes in %v", id, n, took)
	}
	t.Logf("grow: 12 shards x RF=3, %d bytes each; b4 added: 9/9/9/9 after %v; catch-up %.0f bytes, %.0f B/s summed over the leaders "+
		"(throttle %d B/s per broker, appends held back by it %.0f)", perShard, took.Round(time.Millisecond), total, total/took.Seconds(), throttle, throttled-throttledBefore)
	var first error
	if e := g.firstErr.Load(); e != nil {
		first = *e
	}
	t.Logf("grow: publish ack p50/p99 before the move %v/%v (%d acks), during it %v/%v (%d acks); failed publishes %d (cluster clients, refusals sent again; the first: %v)",
		pct(before, 50), pct(before, 99), len(before), pct(during, 50), pct(during, 99), len(during), g.errs.Load(), first)
}

// catchUp is each live broker's felix_raft_catchup_bytes_total, and the
// sum of their felix_raft_catchup_throttled_total.
func (rc *replicatedCluster) catchUp() (map[string]float64, float64) {
	out, throttled := map[string]float64{}, 0.0
	for _, cb := range rc.brokers {
		m := testutil.Scrape(rc.t, "http://"+cb.admin+"/metrics", "")
		v, _ := m.Value("felix_raft_catchup_bytes_total", nil)
		out[cb.id] = v
		v, _ = m.Value("felix_raft_catchup_throttled_total", nil)
		throttled += v
	}
	return out, throttled
}

// growLoad publishes to every shard of "grow" through cluster clients
// (each follows the placement and the owners acks and refusals name), one
// batch in flight each, and keeps the ack latencies.
type growLoad struct {
	t        *testing.T
	ctx      context.Context
	pubs     []*client.ClusterClient
	stopLoad context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	lat      []time.Duration
	errs     atomic.Int64
	firstErr atomic.Pointer[error]
}

func newGrowLoad(t *testing.T, ctx context.Context, rc *replicatedCluster) *growLoad {
	g := &growLoad{t: t, ctx: ctx}
	var boot []string
	for _, cb := range rc.brokers {
		boot = append(boot, cb.addr)
	}
	for range 4 {
		cc, err := client.DialCluster(ctx, client.ClusterConfig{Config: rc.ccfg, Bootstrap: boot, ControlPlaneURL: rc.cp.url})
		require.NoError(t, err)
		t.Cleanup(func() { cc.Close() })
		g.pubs = append(g.pubs, cc)
	}
	return g
}

// fill puts about perShard bytes in every shard, in batches of 16 records
// of 4 KiB.
func (g *growLoad) fill(perShard int) {
	payload := make([]byte, 4<<10)
	batch := slices.Repeat([][]byte{payload}, 16)
	n := 12 * perShard / (16 * len(payload))
	var wg sync.WaitGroup
	for p, pub := range g.pubs {
		wg.Go(func() {
			var pending []*client.PendingAck // four in flight
			for k := p; k < n; k += len(g.pubs) {
				if len(pending) == 4 {
					require.NoError(g.t, pending[0].Wait(g.ctx))
					pending = pending[1:]
				}
				pending = append(pending, pub.PublishAsync(g.ctx, "default", "grow", uint32(k%12), batch))
			}
			for _, pa := range pending {
				require.NoError(g.t, pa.Wait(g.ctx))
			}
		})
	}
	wg.Wait()
}

// start runs the measured load: each publisher a 256-byte record every
// 10 ms, one in flight, to the shards in turn.
func (g *growLoad) start() {
	ctx, stop := context.WithCancel(g.ctx)
	g.stopLoad = stop
	for p, pub := range g.pubs {
		g.wg.Go(func() {
			payload := [][]byte{make([]byte, 256)}
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for k := p; ctx.Err() == nil; k++ {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
				at := time.Now()
				if err := pub.Publish(ctx, "default", "grow", uint32(k%12), payload); err != nil {
					if ctx.Err() == nil {
						g.errs.Add(1)
						g.firstErr.CompareAndSwap(nil, &err)
					}
					continue
				}
				g.mu.Lock()
				g.lat = append(g.lat, time.Since(at))
				g.mu.Unlock()
			}
		})
	}
}

// cut returns the latencies since the last cut.
func (g *growLoad) cut() []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.lat
	g.lat = nil
	return out
}

func (g *growLoad) stop() {
	g.stopLoad()
	g.wg.Wait()
}

// pct is the q-th percentile of ds.
func pct(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, len(s)*q/100)].Round(10 * time.Microsecond)
}
