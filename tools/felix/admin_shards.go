package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/felixmq/felix/cluster"
)

// `felix admin stream shards NAME`: where each shard of a stream lives. The
// control plane's placement names a shard's owner and, for a replicated
// one, its replica set; raft, not the placement, decides which replica
// leads, so the leader of the moment is read from the replicas' brokers:
// each member registered its admin address, whose /debug/felix/stats
// carries the raft state of every replica it holds.

// shardsView is the command's answer.
type shardsView struct {
	Stream           string      `json:"stream"` // tenant/namespace/stream
	PlacementVersion int64       `json:"placement_version"`
	Shards           []shardView `json:"shards"`
}

// shardView is one shard. Leader and Term are the replica that says it
// leads at the highest term any replica reported, empty while none does
// (an election, or no replica reachable).
type shardView struct {
	Shard    int           `json:"shard"`
	Owner    string        `json:"owner"`              // the placement's owner: a replicated shard's preferred leader
	Replicas []string      `json:"replicas,omitempty"` // the replica set, preferred leader first
	Leader   string        `json:"leader,omitempty"`
	Term     uint64        `json:"term,omitempty"`
	Members  []replicaView `json:"members,omitempty"`
}

// replicaView is one replica as its broker reports it: Replica is the
// broker's own JSON (broker.ReplicaStats: role, term, leader, commit and
// applied index, pending proposals, quorum acks, followers' lag), Error
// why it could not be read.
type replicaView struct {
	ID        string          `json:"id"`
	AdminAddr string          `json:"admin_addr,omitempty"`
	Live      bool            `json:"live"`
	Replica   json.RawMessage `json:"replica,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// raftState is the part of a replica's stats the leader is found from.
type raftState struct {
	Role string `json:"role"`
	Term uint64 `json:"term"`
}

// brokerStats is the part of /debug/felix/stats read here.
type brokerStats struct {
	Streams []struct {
		Tenant    string `json:"tenant"`
		Namespace string `json:"namespace"`
		Stream    string `json:"stream"`
		Shards    []struct {
			Shard   int             `json:"shard"`
			Replica json.RawMessage `json:"replica"`
		} `json:"shard_stats"`
	} `json:"streams"`
}

// streamShards is the placement of stream name's shards and their
// replicas' raft state.
func (f *adminFlags) streamShards(name string) (*shardsView, error) {
	var p cluster.Placement
	if err := f.cp.call(http.MethodGet, "/v1/placement", nil, &p); err != nil {
		return nil, err
	}
	view := &shardsView{Stream: f.tenant + "/" + f.namespace + "/" + name, PlacementVersion: p.Version}
	members := map[string]cluster.Member{}
	for _, m := range p.Members {
		members[m.ID] = m
	}
	for _, a := range p.Assignments {
		if a.Tenant != f.tenant || a.Namespace != f.namespace || a.Stream != name {
			continue
		}
		view.Shards = append(view.Shards, shardView{Shard: a.Shard.Shard, Owner: a.Owner, Replicas: a.Replicas})
	}
	if len(view.Shards) == 0 {
		return nil, fmt.Errorf("stream %s has no shard in placement version %d", view.Stream, p.Version)
	}
	token, err := f.adminBearer()
	if err != nil {
		return nil, err
	}
	stats := f.fetchStats(view.Shards, members, token)
	for i := range view.Shards {
		s := &view.Shards[i]
		for _, id := range s.Replicas {
			m := members[id]
			rv := replicaView{ID: id, AdminAddr: m.AdminAddr, Live: m.Live}
			rv.Replica, err = stats[id].replica(f.tenant, f.namespace, name, s.Shard)
			if err != nil {
				rv.Error = err.Error()
			}
			s.Members = append(s.Members, rv)
		}
		s.Leader, s.Term = leaderOf(s.Members)
	}
	return view, nil
}

// leaderOf is the replica that leads at the highest term any replica
// reported, and that term; "" while none does (an election, or a deposed
// leader that has not heard of the newer term yet).
func leaderOf(ms []replicaView) (string, uint64) {
	states := make([]raftState, len(ms))
	var term uint64
	for i, m := range ms {
		if json.Unmarshal(m.Replica, &states[i]) == nil {
			term = max(term, states[i].Term)
		}
	}
	for i, m := range ms {
		if states[i].Role == "leader" && states[i].Term == term {
			return m.ID, term
		}
	}
	return "", term
}

// statsOrError is one broker's stats, or why they could not be read.
type statsOrError struct {
	stats *brokerStats
	err   error
}

// replica is the stats of this broker's replica of the shard.
func (s statsOrError) replica(tenant, namespace, stream string, shard int) (json.RawMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	for _, st := range s.stats.Streams {
		if st.Tenant != tenant || st.Namespace != namespace || st.Stream != stream {
			continue
		}
		for _, sh := range st.Shards {
			if sh.Shard == shard && len(sh.Replica) > 0 && string(sh.Replica) != "null" {
				return sh.Replica, nil
			}
		}
	}
	return nil, fmt.Errorf("the broker holds no replica of shard %d (not opened yet)", shard)
}

// fetchStats reads, all at once, the stats of every member holding a
// replica of shards.
func (f *adminFlags) fetchStats(shards []shardView, members map[string]cluster.Member, token string) map[string]statsOrError {
	var ids []string
	for _, s := range shards {
		for _, id := range s.Replicas {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	got := make([]statsOrError, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			got[i].stats, got[i].err = getStats(members[id], token, f.cp.timeout)
		})
	}
	wg.Wait()
	out := make(map[string]statsOrError, len(ids))
	for i, id := range ids {
		out[id] = got[i]
	}
	return out
}

// getStats reads m's /debug/felix/stats (plain HTTP, as the admin API
// serves it), sending token as a bearer when it is set.
func getStats(m cluster.Member, token string, timeout time.Duration) (*brokerStats, error) {
	if m.AdminAddr == "" {
		return nil, fmt.Errorf("member %q registered no admin address", m.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.AdminAddr+"/debug/felix/stats", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	var st brokerStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	return &st, nil
}

// adminBearer is --admin-token-file's token, "" without one.
func (f *adminFlags) adminBearer() (string, error) {
	if f.adminTokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(f.adminTokenFile)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// runShards is `felix admin stream shards NAME`.
func (f *adminFlags) runShards(name string, stdout, stderr io.Writer) int {
	err := f.cp.check()
	switch {
	case err != nil:
	case name == "":
		err = fmt.Errorf("stream shards takes a NAME")
	case f.tenant == "" || f.namespace == "":
		err = fmt.Errorf("stream shards needs --tenant and --namespace")
	}
	if err != nil {
		fmt.Fprintln(stderr, "felix admin:", err)
		return exitUsage
	}
	view, err := f.streamShards(name)
	if err != nil {
		fmt.Fprintln(stderr, "felix admin:", err)
		return exitFail
	}
	out, _ := json.MarshalIndent(view, "", "  ")
	stdout.Write(append(out, '\n'))
	return exitOK
}
