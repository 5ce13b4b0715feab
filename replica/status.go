package replica

import "go.etcd.io/raft/v3"

// Status is a snapshot of a replica for metrics and stats.
type Status struct {
	ID     uint64
	Role   string // leader, follower, candidate, pre-candidate
	Term   uint64
	Leader uint64 // 0: none known
	// Commit is the last committed index (= offset + 1); Applied the last
	// told to Apply; LastIndex the last in the log.
	Commit, Applied, LastIndex uint64
	// Match is, on a leader, each replica's highest index known to be in
	// its log (itself included), read once per tick; MatchLast is
	// LastIndex at that moment. Compared with LastIndex instead, a replica
	// in step would look behind by all that was appended since the read.
	Match     map[uint64]uint64
	MatchLast uint64
	// Silent is, on a leader, the replicas it has not heard from within
	// an election timeout: whatever their Match, they are not in sync.
	Silent []uint64
	// Pending is the proposals raft took from this replica that are not
	// answered yet; Held those waiting for raft to have room.
	Pending, Held int
	// Voters and Learners are the membership this replica applied, sorted.
	Voters, Learners []uint64
	// Transferee, on a leader, is the voter its leadership is being handed
	// to (0: none).
	Transferee uint64
	// Failed is the storage failure that stopped the replica, "" if none.
	Failed string
	// Syncs is the log syncs under SyncEachWrite since Open, and
	// SyncedRecords the entries they made durable.
	Syncs, SyncedRecords uint64
}

// Lag is, on a leader, how many entries replica id trailed this log when
// Match was read; ok is false for a replica Match does not list.
func (s Status) Lag(id uint64) (lag uint64, ok bool) {
	m, ok := s.Match[id]
	return s.MatchLast - min(m, s.MatchLast), ok
}

// Status returns the replica's last published state (it is refreshed at
// every round of the group's goroutine).
func (g *Group) Status() Status { return *g.status.Load() }

// Leader is the leader this replica knows of (0: none) and its term.
func (g *Group) Leader() (id, term uint64) {
	s := g.status.Load()
	return s.Leader, s.Term
}

func (g *Group) publishStatus() {
	bs := g.rn.BasicStatus()
	s := &Status{ID: g.cfg.ID, Role: roleName(bs.RaftState), Term: bs.GetTerm(), Leader: bs.Lead,
		Commit: bs.GetCommit(), Applied: g.applied, LastIndex: g.st.lastIndex(), Pending: len(g.props.q), Held: len(g.held.q),
		Syncs: g.syncs, SyncedRecords: g.syncedRecords}
	if g.leader && g.progress != nil {
		s.Match, s.Silent, s.MatchLast = g.progress, g.silent, g.progressLast
	}
	if g.failed != nil {
		s.Failed = g.failed.Error()
	}
	g.membershipStatus(s)
	g.status.Store(s)
}

func roleName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return "follower"
}
