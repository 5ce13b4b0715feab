package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
)

// startClusterCP is startCP with a placer: brokers register and the
// placement is served.
func startClusterCP(t *testing.T) string {
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	require.NoError(t, err)
	placer, err := controlplane.NewPlacer(st, controlplane.PlacerConfig{LeaseTTL: time.Second, MaxMoves: -1})
	require.NoError(t, err)
	boot, err := controlplane.NewBootstrapAuthorizer(cpBootstrapToken)
	require.NoError(t, err)
	srv, err := controlplane.New(controlplane.Config{Store: st, Authorizer: boot, Placer: placer})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close(); placer.Close(); st.Close() })
	return hs.URL
}

// felix admin shard list shows replicated shards with their reported
// groups (--under-replicated: the ones missing in-sync voters); shard move
// and shard leader change the target set, with the control plane's typed
// refusals printed.
func TestAdminShardListMoveLeader(t *testing.T) {
	cp := startClusterCP(t)
	boot := filepath.Join(t.TempDir(), "boot.token")
	require.NoError(t, os.WriteFile(boot, []byte(cpBootstrapToken), 0o600))
	admin := func(args ...string) (int, string, string) {
		return runCLI(append([]string{"admin"}, append(args, "--controlplane", cp, "--token-file", boot)...)...)
	}
	for _, args := range [][]string{{"tenant", "create", "t1"}, {"namespace", "create", "ns", "--tenant", "t1"}} {
		code, _, stderr := admin(args...)
		require.Equal(t, exitOK, code, stderr)
	}

	// Four brokers; each reports the groups it leads as the placement
	// wants them, every voter in sync unless lagging names one.
	var mu sync.Mutex
	var placed cluster.Placement
	lagging := "none"
	reports := func(id string) func() []cluster.ReplicaReport {
		return func() []cluster.ReplicaReport {
			mu.Lock()
			defer mu.Unlock()
			var out []cluster.ReplicaReport
			for _, a := range placed.Assignments {
				if a.Replicated() && a.Replicas[0] == id {
					set := slices.Sorted(slices.Values(a.Replicas))
					in := slices.DeleteFunc(slices.Clone(set), func(m string) bool { return m == lagging })
					out = append(out, cluster.ReplicaReport{Shard: a.Shard, Leader: id, Term: 1, Voters: set, InSync: in})
				}
			}
			return out
		}
	}
	for i := range 4 {
		id := fmt.Sprintf("b%d", i)
		a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: cp, Token: cpBootstrapToken, Replicas: reports(id),
			Member: cluster.Member{ID: id, QUICAddr: fmt.Sprintf("127.0.0.1:%d", 7001+i)}})
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
	}
	code, _, stderr := admin("stream", "create", "r", "--durable", "--replicas", "3", "--shards", "2", "--tenant", "t1", "--namespace", "ns")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = admin("stream", "create", "plain", "--durable", "--tenant", "t1", "--namespace", "ns")
	require.Equal(t, exitOK, code, stderr)

	type listing struct {
		Shards []shardRow
	}
	list := func(args ...string) listing {
		t.Helper()
		code, out, stderr := admin(append([]string{"shard", "list"}, args...)...)
		require.Equal(t, exitOK, code, stderr)
		var l listing
		require.NoError(t, json.Unmarshal([]byte(out), &l))
		return l
	}
	var l listing
	require.Eventually(t, func() bool { l = list("--stream", "r", "--tenant", "t1"); return len(l.Shards) == 2 }, 10*time.Second, 20*time.Millisecond,
		"the replicated stream's shards, not plain's")
	mu.Lock()
	for _, row := range l.Shards {
		placed.Assignments = append(placed.Assignments, row.Assignment)
	}
	lagging = l.Shards[0].Replicas[2]
	mu.Unlock()
	require.Eventually(t, func() bool {
		l := list("--under-replicated")
		return len(l.Shards) >= 1 && !slices.ContainsFunc(l.Shards, func(r shardRow) bool { return r.Voters == nil })
	}, 10*time.Second, 50*time.Millisecond)
	for _, row := range list("--under-replicated").Shards {
		require.True(t, row.UnderReplicated)
		require.NotContains(t, row.InSync, lagging)
		require.Contains(t, row.Replicas, lagging)
	}
	mu.Lock()
	lagging = "none"
	mu.Unlock()
	require.Eventually(t, func() bool { return len(list("--under-replicated").Shards) == 0 }, 10*time.Second, 50*time.Millisecond)

	row := list("--stream", "r").Shards[0]
	var spare string
	for i := range 4 {
		if id := fmt.Sprintf("b%d", i); !slices.Contains(row.Replicas, id) {
			spare = id
		}
	}
	shard := fmt.Sprint(row.Shard.Shard)
	shardCmd := func(verb string, args ...string) (int, string, string) {
		return admin(append([]string{"shard", verb, "--stream", "r", "--tenant", "t1", "--namespace", "ns"}, args...)...)
	}
	code, _, stderr = shardCmd("move", "--shard", shard, "--from", spare, "--to", row.Replicas[1])
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "bad_request")
	require.Contains(t, stderr, "is not one of its replicas")
	code, _, _ = shardCmd("move", "--shard", shard, "--to", spare)
	require.Equal(t, exitUsage, code, "move needs --from")
	code, _, stderr = admin("shard", "move", "--stream", "plain", "--tenant", "t1", "--namespace", "ns", "--shard", "0", "--from", "b0", "--to", "b1")
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "not_found")

	code, out, stderr := shardCmd("move", "--shard", shard, "--from", row.Replicas[1], "--to", spare)
	require.Equal(t, exitOK, code, stderr)
	var moved api.ShardChangeResponse
	require.NoError(t, json.Unmarshal([]byte(out), &moved))
	require.Contains(t, moved.Assignment.Replicas, spare)
	require.NotContains(t, moved.Assignment.Replicas, row.Replicas[1])
	code, _, stderr = shardCmd("move", "--shard", shard, "--from", spare, "--to", row.Replicas[1])
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "moving", "one move at a time: the group still reports the old set")

	code, out, stderr = shardCmd("leader", "--shard", shard, "--to", spare)
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &moved))
	require.Equal(t, spare, moved.Assignment.Replicas[0])
}
