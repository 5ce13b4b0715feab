package broker

import (
	"sort"
	"strconv"
	"sync/atomic"
	"time"
)

// ReplicaStats is one replica of a replicated shard as /debug/felix/stats
// and felixtrace show it.
type ReplicaStats struct {
	Role   string `json:"role"` // leader, follower, candidate, pre-candidate
	Term   uint64 `json:"term"`
	Leader string `json:"leader,omitempty"` // member id; "" while none is known
	// Commit and Applied are raft indexes (offset + 1): committed, and
	// delivered to subscribers; LastIndex is the last in this log.
	Commit    uint64 `json:"commit_index"`
	Applied   uint64 `json:"applied_index"`
	LastIndex uint64 `json:"last_index"`
	// Pending is the publishes this replica took that are not answered;
	// Held those of them waiting for raft to have room (64 MiB
	// uncommitted), not yet in the log.
	Pending int `json:"pending_proposals"`
	Held    int `json:"held_proposals"`
	// QuorumAcks and QuorumWaitMeanMs: quorum publishes this leader acked
	// and their mean wait from proposal to commit.
	QuorumAcks       uint64  `json:"quorum_acks"`
	QuorumWaitMeanMs float64 `json:"quorum_wait_mean_ms"`
	// Syncs and SyncedRecords: this replica's log syncs (on_commit) and
	// the records they made durable.
	Syncs         uint64 `json:"log_syncs"`
	SyncedRecords uint64 `json:"log_synced_records"`
	// Voters and Learners are the group's membership (member ids); InSync,
	// on a leader, the voters caught up with it.
	Voters   []string `json:"voters,omitempty"`
	Learners []string `json:"learners,omitempty"`
	InSync   []string `json:"in_sync,omitempty"`
	// Transferee, on a leader, is the voter it is handing its leadership
	// to.
	Transferee string `json:"transferee,omitempty"`
	// Followers is, on a leader, each other replica's progress.
	Followers []FollowerStats `json:"followers,omitempty"`
	Failed    string          `json:"failed,omitempty"`
}

// FollowerStats is a follower's progress as its leader sees it.
type FollowerStats struct {
	ID         string `json:"id"`
	Match      uint64 `json:"match_index"`
	LagRecords uint64 `json:"lag_records"`
}

// quorumWait accounts a replica's quorum acks.
type quorumWait struct {
	acks, nanos atomic.Uint64
}

func (q *quorumWait) observe(d time.Duration) {
	q.acks.Add(1)
	q.nanos.Add(uint64(d))
}

func (r *replicated) stats() *ReplicaStats {
	s := r.group.Status()
	out := &ReplicaStats{Role: s.Role, Term: s.Term, Commit: s.Commit, Applied: s.Applied, LastIndex: s.LastIndex,
		Pending: s.Pending + s.Held, Held: s.Held, Failed: s.Failed, QuorumAcks: r.quorum.acks.Load(),
		Syncs: s.Syncs, SyncedRecords: s.SyncedRecords}
	if out.QuorumAcks > 0 {
		out.QuorumWaitMeanMs = float64(r.quorum.nanos.Load()) / float64(out.QuorumAcks) / 1e6
	}
	if s.Leader != 0 {
		out.Leader = r.memberName(s.Leader)
	}
	out.Voters, out.Learners = r.memberNames(s.Voters), r.memberNames(s.Learners)
	if s.Role == "leader" {
		out.InSync = r.memberNames(inSync(s))
		if s.Transferee != 0 {
			out.Transferee = r.memberName(s.Transferee)
		}
	}
	for id, match := range s.Match {
		if id != s.ID {
			lag, _ := s.Lag(id)
			out.Followers = append(out.Followers, FollowerStats{ID: r.memberName(id), Match: match, LagRecords: lag})
		}
	}
	sort.Slice(out.Followers, func(i, j int) bool { return out.Followers[i].ID < out.Followers[j].ID })
	return out
}

// memberNames are the member ids of ids, sorted.
func (r *replicated) memberNames(ids []uint64) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = r.memberName(id)
	}
	sort.Strings(out)
	return out
}

// memberName is the member id of raft id id, or the id in hex when the
// placement did not name it.
func (r *replicated) memberName(id uint64) string {
	if m, ok := r.sh.b.raft.member(id); ok {
		return m.ID
	}
	if id == raftID(r.sh.b.cfg.NodeID) {
		return r.sh.b.cfg.NodeID
	}
	return strconv.FormatUint(id, 16)
}
