package replica

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Membership and leadership changes (docs/cluster.md, "Operating a
// replicated cluster"). The owner decides what the group should be; these
// calls ask raft for one step at a time, on the group's goroutine, and a
// later Status shows the outcome. Raft takes one membership change at a
// time (a change asked for while another is not applied becomes an empty
// entry) and each step is idempotent, so the owner asks again, paced,
// until Status shows it.

// ChangeKind is one membership step.
type ChangeKind uint8

const (
	// AddLearner adds a replica that receives the log but does not vote.
	AddLearner ChangeKind = iota
	// Promote makes a learner a voter.
	Promote
	// Remove removes a voter or a learner.
	Remove
)

func (k ChangeKind) String() string {
	return [...]string{"add-learner", "promote", "remove"}[k]
}

type change struct {
	kind ChangeKind
	id   uint64
}

// ChangeMembership asks the leader to make one membership change; a
// follower ignores it, as raft does a second change before the first is
// applied.
func (g *Group) ChangeMembership(kind ChangeKind, id uint64) {
	g.in.Lock()
	if !g.in.closed {
		g.in.changes = append(g.in.changes, change{kind, id})
	}
	g.in.Unlock()
	signal(g.wake)
}

// TransferLeadership asks the leader to hand its leadership to voter id
// (raft's leadership transfer: the target is caught up, then told to stand
// at once). While it runs the leader takes no proposal and names the
// target as the leader, so clients go there.
func (g *Group) TransferLeadership(id uint64) {
	g.in.Lock()
	if !g.in.closed {
		g.in.transfer = id
	}
	g.in.Unlock()
	signal(g.wake)
}

// applyRequests runs the membership and leadership requests that arrived,
// on the group's goroutine.
func (g *Group) applyRequests(changes []change, transfer uint64) {
	if g.failed != nil || !g.leader {
		return
	}
	if transfer != 0 && transfer != g.cfg.ID {
		g.rn.TransferLeader(transfer)
	}
	for _, c := range changes {
		cc := &pb.ConfChange{NodeId: &c.id}
		switch c.kind {
		case AddLearner:
			cc.Type = pb.ConfChangeType_ConfChangeAddLearnerNode.Enum()
		case Promote:
			cc.Type = pb.ConfChangeType_ConfChangeAddNode.Enum()
		case Remove:
			cc.Type = pb.ConfChangeType_ConfChangeRemoveNode.Enum()
		}
		if err := g.rn.ProposeConfChange(cc); err != nil {
			g.cfg.Logger.Debug("replica: membership change not taken", "change", c.kind.String(), "id", fmt.Sprintf("%x", c.id), "err", err)
		}
	}
}

// membershipStatus fills the membership and progress part of s.
func (g *Group) membershipStatus(s *Status) {
	g.st.mu.Lock()
	cs := g.st.st.cs
	s.Voters = slices.Clone(cs.GetVoters())
	s.Learners = slices.Clone(cs.GetLearners())
	g.st.mu.Unlock()
	slices.Sort(s.Voters)
	slices.Sort(s.Learners)
	if g.leader {
		s.Transferee = g.rn.BasicStatus().LeadTransferee
	}
}

// leaderProgress records each replica's match index, for Status, and the
// replicas the leader has not heard from for more than an election
// timeout: a follower that died while the log was idle keeps its match,
// but is not in sync. Raft's RecentActive alone would not do: CheckQuorum
// clears it every election timeout and a live follower's next answer sets
// it again, so it is false for a moment on every follower. It is called
// once per tick.
func (g *Group) leaderProgress() {
	g.progress, g.silent, g.progressLast = map[uint64]uint64{}, nil, g.st.lastIndex()
	if g.quiet == nil {
		g.quiet = map[uint64]int{}
	}
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		g.progress[id] = pr.Match
		switch {
		case pr.RecentActive || id == g.cfg.ID:
			delete(g.quiet, id)
		case g.quiet[id] >= g.cfg.ElectionTicks:
			g.silent = append(g.silent, id)
		default:
			g.quiet[id]++
		}
	})
}

// isMember reports whether cs has id as a voter or a learner.
func isMember(cs *pb.ConfState, id uint64) bool {
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetLearners(), id)
}
