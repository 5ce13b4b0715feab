package broker

import (
	"context"
	"errors"
	"os"
	"slices"
	"time"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/replica"
)

// Moving a replicated shard's membership and leadership (docs/cluster.md,
// "Operating a replicated cluster"). The placement names the replica set
// the control plane wants (route.replicas, the preferred leader first) and,
// from the leaders' reports, the group's membership (route.voters,
// learners). The leader moves the group toward the wanted set one raft
// membership change at a time: a missing member joins as a learner, is
// promoted once caught up, and only then does a member that should go
// leave (handing its leadership over first if it leads). With every step
// one change, a majority of the old and of the new membership always
// overlap, so nothing committed is lost on the way.

// replicaSpec is how a replica opens: as a member of a new group (voters,
// from the placement's set), or joining a running one as a learner (the
// group's voters as reported, and itself).
type replicaSpec struct {
	voters, learners []uint64
	target           []cluster.Member
}

// replicaSpecOf is how this broker opens its replica of the shard r routes.
func (b *Broker) replicaSpecOf(r *route) replicaSpec {
	self := b.cfg.NodeID
	if r.reported && !slices.Contains(r.voters, self) {
		// The group runs without this broker (it is being added): join
		// it as the learner the leader adds.
		return replicaSpec{voters: memberIDs(r.voters), learners: []uint64{raftID(self)}, target: r.replicas}
	}
	return replicaSpec{voters: replicaIDs(r.replicas), target: r.replicas}
}

func memberIDs(ids []string) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = raftID(id)
	}
	return out
}

// memberSteps paces a leader's membership requests: raft takes one change
// at a time and each is idempotent, so a step is asked again only after
// stepEvery.
type memberSteps struct {
	askedAt   time.Time
	leadSince time.Time
	wasLeader bool
}

const (
	stepEvery = time.Second
	// preferredAfter is how long a leader serves before it hands over to
	// the preferred leader: no ping-pong right after an election.
	preferredAfter = 10 * time.Second
	// caughtUpSlack is how many records a replica may trail its leader's
	// last index and still count as caught up (in sync).
	caughtUpSlack = 1024
	// readySlack is how close a learner must be to be promoted, or a
	// voter to be handed the leadership: records may be large (1,024 of
	// 64 KiB are 64 MiB), and a learner promoted that far behind would
	// catch up the rest unthrottled, a transfer to it time out.
	readySlack = 64
)

// reconcile is run by the raft ticker for each replica: on a leader, it
// asks for the next step toward the wanted membership, or hands the
// leadership to the preferred leader.
func (r *replicated) reconcile(now time.Time) {
	s := r.group.Status()
	r.noteReport(s)
	leader := s.Role == "leader"
	ms := &r.members
	if leader && !ms.wasLeader {
		ms.leadSince = now
	}
	ms.wasLeader = leader
	target := r.target.Load()
	if !leader || target == nil || len(*target) == 0 || s.Transferee != 0 || now.Sub(ms.askedAt) < stepEvery {
		return
	}
	b := r.sh.b
	if b.draining.Load() {
		return
	}
	kind, id, ok := nextStep(s, *target, raftID(b.cfg.NodeID), func(id uint64) bool {
		m, ok := b.raft.member(id)
		return ok && m.Live
	})
	if !ok {
		if pref := raftID((*target)[0].ID); pref != s.ID && now.Sub(ms.leadSince) >= preferredAfter &&
			slices.Contains(s.Voters, pref) && ready(s, pref) && (*target)[0].Live {
			ms.askedAt = now
			b.log.Info("replica: handing the leadership to the preferred leader", "stream", r.sh.st.spec.String(),
				"shard", r.sh.id, "to", (*target)[0].ID)
			r.group.TransferLeadership(pref)
		}
		return
	}
	ms.askedAt = now
	if kind == stepTransfer {
		b.log.Info("replica: leaving the group; handing the leadership over first", "stream", r.sh.st.spec.String(),
			"shard", r.sh.id, "to", r.memberName(id))
		r.group.TransferLeadership(id)
		return
	}
	b.log.Info("replica: membership change", "stream", r.sh.st.spec.String(), "shard", r.sh.id,
		"change", replica.ChangeKind(kind).String(), "member", r.memberName(id))
	r.group.ChangeMembership(replica.ChangeKind(kind), id)
}

// stepTransfer is nextStep's "hand the leadership to id first".
const stepTransfer = 0xff

// nextStep is the next membership step of a leader with status s toward
// the wanted set: add a missing live member as a learner, promote a caught
// up learner of the set, remove a learner not in the set, and once every
// member of the set votes, remove a voter not in it (if that is the leader
// itself, first hand the leadership to a caught up voter of the set). ok is
// false when the membership is the set.
func nextStep(s replica.Status, target []cluster.Member, self uint64, live func(uint64) bool) (kind uint8, id uint64, ok bool) {
	want := make([]uint64, len(target))
	for i, m := range target {
		want[i] = raftID(m.ID)
	}
	for _, w := range want {
		if !slices.Contains(s.Voters, w) && !slices.Contains(s.Learners, w) && live(w) {
			return uint8(replica.AddLearner), w, true
		}
	}
	for _, l := range s.Learners {
		if slices.Contains(want, l) && ready(s, l) {
			return uint8(replica.Promote), l, true
		}
		if !slices.Contains(want, l) {
			return uint8(replica.Remove), l, true
		}
	}
	for _, w := range want {
		if !slices.Contains(s.Voters, w) {
			return 0, 0, false // still joining: nobody leaves before
		}
	}
	for _, v := range s.Voters {
		if slices.Contains(want, v) {
			continue
		}
		if v != self {
			return uint8(replica.Remove), v, true
		}
		for _, w := range want {
			if ready(s, w) {
				return stepTransfer, w, true
			}
		}
		return 0, 0, false
	}
	return 0, 0, false
}

// caughtUp reports whether replica id is within caughtUpSlack records of
// the leader's last index when the leader last read its progress (s is the
// leader's status).
func caughtUp(s replica.Status, id uint64) bool { return within(s, id, caughtUpSlack) }

// ready reports whether replica id is within readySlack records of the
// leader's last index, as caughtUp: close enough to promote or to lead.
func ready(s replica.Status, id uint64) bool { return within(s, id, readySlack) }

func within(s replica.Status, id, slack uint64) bool {
	lag, ok := s.Lag(id)
	return ok && lag <= slack && !slices.Contains(s.Silent, id)
}

// handOffTarget is the voter, other than the leader whose status is s,
// that is in sync and furthest along; 0 if there is none.
func handOffTarget(s replica.Status) uint64 {
	to := uint64(0)
	for _, v := range s.Voters {
		if v != s.ID && caughtUp(s, v) && (to == 0 || s.Match[v] > s.Match[to]) {
			to = v
		}
	}
	return to
}

// inSync are the voters caught up with the leader.
func inSync(s replica.Status) []uint64 {
	var out []uint64
	for _, v := range s.Voters {
		if caughtUp(s, v) {
			out = append(out, v)
		}
	}
	return out
}

// handOffLeaderships hands every leadership this broker holds to a caught
// up voter before it drains (SIGTERM), so that clients are redirected
// instead of failing: at most until ctx ends or handOffTimeout passes.
func (b *Broker) handOffLeaderships(ctx context.Context) {
	deadline := time.Now().Add(handOffTimeout)
	var handing []*replicated
	for _, r := range b.raft.groupList() {
		s := r.group.Status()
		if s.Role != "leader" {
			continue
		}
		to := handOffTarget(s)
		if to == 0 {
			b.log.Warn("replica: no caught up voter to hand the leadership to before draining",
				"stream", r.sh.st.spec.String(), "shard", r.sh.id)
			continue
		}
		r.group.TransferLeadership(to)
		handing = append(handing, r)
	}
	for _, r := range handing {
		// Until the new leader is known here too: publishes refused once
		// draining name it (not_leader) rather than fail.
		for s := r.group.Status(); (s.Role == "leader" || s.Leader == 0) && time.Now().Before(deadline) && ctx.Err() == nil; s = r.group.Status() {
			time.Sleep(5 * time.Millisecond)
		}
		s := r.group.Status()
		b.log.Info("replica: leadership handed over before draining", "stream", r.sh.st.spec.String(), "shard", r.sh.id,
			"handed", s.Role != "leader", "leader", r.memberName(s.Leader))
	}
}

// handOffTimeout bounds the hand-off before a drain: a few election
// timeouts' worth.
const handOffTimeout = 3 * time.Second

// discardStale closes and removes this broker's replicas that the placement
// says the group no longer has: not in the wanted set, and absent from the
// membership its leader reported. A broker that was replaced while it was
// down finds its copy so, and drops it before anything reads it.
func (b *Broker) discardStale(v *placementView) {
	for k, rs := range v.streams {
		st, err := b.streams.lookup(k)
		if err != nil {
			continue
		}
		for i, r := range rs {
			if r == nil || r.replicas == nil || r.holds || !r.reported || i >= len(st.shards) {
				continue
			}
			sh := st.shards[i]
			if err := sh.discardReplica(); err != nil {
				b.log.Error("replica: a stale copy could not be removed", "stream", k.String(), "shard", i, "err", err)
			}
		}
	}
}

// discardReplica closes the shard's replica, if open, and removes its
// directory.
func (sh *shard) discardReplica() error {
	sh.openMu.Lock()
	defer sh.openMu.Unlock()
	dir := sh.b.shardDir(sh.st.spec, sh.id)
	r := sh.rep.Load()
	if r == nil && !exists(dir) {
		return nil
	}
	if r != nil {
		sh.rep.Store(nil)
		if err := r.close(); err != nil && !errors.Is(err, ErrDraining) {
			sh.b.log.Warn("replica: closing a stale copy", "stream", sh.st.spec.String(), "shard", sh.id, "err", err)
		}
	}
	sh.b.log.Info("replica: the group no longer has this broker; its copy is removed", "stream", sh.st.spec.String(),
		"shard", sh.id, "dir", dir)
	return os.RemoveAll(dir)
}
