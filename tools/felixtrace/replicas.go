package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/felixmq/felix/broker"
)

// ReplicaSample is this broker's replica of one replicated shard: its raft
// state at the interval's end, and the quorum publishes it acked as leader
// in the interval.
type ReplicaSample struct {
	Shard  string `json:"shard"` // tenant/namespace/stream#shard
	Role   string `json:"role"`  // leader, follower, candidate, pre-candidate
	Term   uint64 `json:"term"`
	Leader string `json:"leader,omitempty"` // "" while none is known
	// Commit and Applied are raft indexes (offset + 1): committed, and
	// delivered to subscribers; LastIndex is the last in this log.
	Commit    uint64 `json:"commit_index"`
	Applied   uint64 `json:"applied_index"`
	LastIndex uint64 `json:"last_index"`
	Pending   int    `json:"pending_proposals"`
	// QuorumAcks in the interval, per second, and their mean wait from
	// proposal to commit.
	QuorumAcks    uint64        `json:"quorum_acks"`
	QuorumAckRate float64       `json:"quorum_acks_per_s"`
	QuorumWait    time.Duration `json:"quorum_wait_mean_ns"`
	// Followers is, on a leader, each other replica's lag in records.
	Followers []broker.FollowerStats `json:"followers,omitempty"`
	Failed    string                 `json:"failed,omitempty"`
}

func replicaSamples(prev, cur *broker.Stats, d time.Duration) []ReplicaSample {
	before := map[string]*broker.ReplicaStats{}
	for _, st := range prev.Streams {
		for _, sh := range st.Shards {
			if sh.Replica != nil {
				before[shardKey(st, sh.Shard)] = sh.Replica
			}
		}
	}
	var out []ReplicaSample
	for _, st := range cur.Streams {
		for _, sh := range st.Shards {
			r := sh.Replica
			if r == nil {
				continue
			}
			s := ReplicaSample{Shard: shardKey(st, sh.Shard), Role: r.Role, Term: r.Term, Leader: r.Leader,
				Commit: r.Commit, Applied: r.Applied, LastIndex: r.LastIndex, Pending: r.Pending,
				Followers: r.Followers, Failed: r.Failed}
			p := before[s.Shard]
			if p == nil || r.QuorumAcks < p.QuorumAcks { // new, or reopened: counts start again
				p = &broker.ReplicaStats{}
			}
			s.QuorumAcks = r.QuorumAcks - p.QuorumAcks
			s.QuorumAckRate = perSecond(s.QuorumAcks, d)
			if s.QuorumAcks > 0 {
				waitMs := r.QuorumWaitMeanMs*float64(r.QuorumAcks) - p.QuorumWaitMeanMs*float64(p.QuorumAcks)
				s.QuorumWait = time.Duration(max(waitMs, 0) / float64(s.QuorumAcks) * float64(time.Millisecond))
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b ReplicaSample) int { return strings.Compare(a.Shard, b.Shard) })
	return out
}

// printReplicas writes a REPLICA row per replicated shard, at most top
// (nothing on a broker that holds no replica).
func printReplicas(w io.Writer, rs []ReplicaSample, top int) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "%-32s %-13s %5s %-12s %9s %9s %7s %8s %8s  %s\n", "REPLICA", "ROLE", "TERM", "LEADER", "COMMIT", "APPLIED",
		"PENDING", "QACKS/s", "QWAIT", "FOLLOWERS (lag, records)")
	for _, r := range rs[:min(top, len(rs))] {
		wait := "-"
		if r.QuorumAcks > 0 {
			wait = fmtDur(r.QuorumWait)
		}
		fmt.Fprintf(w, "%-32s %-13s %5d %-12s %9d %9d %7d %8s %8s  %s\n", clip(r.Shard, 32), r.Role, r.Term, clip(cmp.Or(r.Leader, "-"), 12),
			r.Commit, r.Applied, r.Pending, fmtCount(r.QuorumAckRate), wait, followerLags(r))
	}
	more(w, len(rs)-top, "replicas")
}

// followerLags lists a leader's followers with their lag, or says why a
// replica has nothing to list.
func followerLags(r ReplicaSample) string {
	if r.Failed != "" {
		return "FAILED: " + r.Failed
	}
	if len(r.Followers) == 0 {
		return "-"
	}
	parts := make([]string, len(r.Followers))
	for i, f := range r.Followers {
		parts[i] = fmt.Sprintf("%s %d", f.ID, f.LagRecords)
	}
	return strings.Join(parts, ", ")
}

// ReplicaSummary is one replica over the run: its last state, how often
// its term moved (an election began) and it changed role, its quorum acks and
// their mean wait, and the largest follower lag seen.
type ReplicaSummary struct {
	Shard       string        `json:"shard"`
	Role        string        `json:"role"`
	Term        uint64        `json:"term"`
	Leader      string        `json:"leader,omitempty"`
	TermChanges int           `json:"term_changes"`
	RoleChanges int           `json:"role_changes"`
	QuorumAcks  uint64        `json:"quorum_acks"`
	QuorumWait  time.Duration `json:"quorum_wait_mean_ns"`
	MaxLag      uint64        `json:"max_follower_lag_records"`
	waitTotal   time.Duration
}

func (m *Summary) addReplicas(s *Sample) {
	if m.replicas == nil {
		m.replicas = map[string]*ReplicaSummary{}
	}
	for _, r := range s.Replicas {
		rs := m.replicas[r.Shard]
		if rs == nil {
			rs = &ReplicaSummary{Shard: r.Shard, Role: r.Role, Term: r.Term}
			m.replicas[r.Shard] = rs
		}
		if r.Term != rs.Term {
			rs.TermChanges++
		}
		if r.Role != rs.Role {
			rs.RoleChanges++
		}
		rs.Role, rs.Term, rs.Leader = r.Role, r.Term, r.Leader
		rs.QuorumAcks += r.QuorumAcks
		rs.waitTotal += r.QuorumWait * time.Duration(r.QuorumAcks)
		if rs.QuorumAcks > 0 {
			rs.QuorumWait = rs.waitTotal / time.Duration(rs.QuorumAcks)
		}
		for _, f := range r.Followers {
			rs.MaxLag = max(rs.MaxLag, f.LagRecords)
		}
	}
}

func (m *Summary) finishReplicas() {
	m.Replicas = m.Replicas[:0]
	for _, r := range m.replicas {
		m.Replicas = append(m.Replicas, *r)
	}
	slices.SortFunc(m.Replicas, func(a, b ReplicaSummary) int { return strings.Compare(a.Shard, b.Shard) })
}

func printReplicaSummary(w io.Writer, rs []ReplicaSummary, top int) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "%-32s %-13s %5s %-12s %9s %9s %12s %9s %8s\n", "REPLICA", "ROLE (last)", "TERM", "LEADER", "TERM CHG", "ROLE CHG",
		"QUORUM ACKS", "QWAIT", "MAX LAG")
	for _, r := range rs[:min(top, len(rs))] {
		wait := "-"
		if r.QuorumAcks > 0 {
			wait = fmtDur(r.QuorumWait)
		}
		fmt.Fprintf(w, "%-32s %-13s %5d %-12s %9d %9d %12d %9s %8d\n", clip(r.Shard, 32), r.Role, r.Term, clip(cmp.Or(r.Leader, "-"), 12),
			r.TermChanges, r.RoleChanges, r.QuorumAcks, wait, r.MaxLag)
	}
	more(w, len(rs)-top, "replicas")
}
