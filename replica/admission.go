package replica

import "time"

// Admission: raft drops a proposal that would take the leader's
// uncommitted entries past MaxUncommittedBytes. Refusing it made
// publishers that run ahead of the commit (leader acks, or many batches in
// flight) re-send what was refused, and everything queued behind it, over
// and over: in a throughput run of leader acks, 3,500 batches of 256 KiB
// per 512 MiB published. Instead the dropped proposal waits, with what
// came after it and in that order, until applied entries make room; its
// answer waits with it, which holds the publisher back through its own
// window of unanswered batches. What waits is bounded by MaxHeldBytes
// (beyond it a proposal is refused ErrProposalDropped, as before) and by
// QuorumTimeout.

// held is the proposals raft has not taken yet for want of room, in
// order, on the group's goroutine.
type held struct {
	q     []*proposal
	bytes uint64
}

// admit proposes what waits, then props, in order, stopping at the first
// that raft drops: it and what follows wait (within MaxHeldBytes).
func (g *Group) admit(props []*proposal) {
	for len(g.held.q) > 0 {
		p := g.held.q[0]
		if !g.propose(p) {
			g.hold(props)
			return
		}
		g.held.q[0] = nil
		g.held.q = g.held.q[1:]
		g.held.bytes -= p.size
	}
	for i, p := range props {
		if !g.propose(p) {
			g.hold(props[i:])
			return
		}
	}
}

// hold keeps ps waiting, refusing the first that would take what waits
// past MaxHeldBytes and everything after it, so that nothing lands ahead
// of a refused proposal's re-send (an idempotent producer's batches must
// reach the log in sequence). The first always waits: raft takes a
// proposal of any size once nothing is uncommitted.
func (g *Group) hold(ps []*proposal) {
	for i, p := range ps {
		if len(g.held.q) > 0 && g.held.bytes+p.size > g.cfg.MaxHeldBytes {
			failEach(ps[i:], ErrProposalDropped)
			return
		}
		g.held.q = append(g.held.q, p)
		g.held.bytes += p.size
	}
}

// refuseHeld answers everything waiting with err.
func (g *Group) refuseHeld(err error) {
	failEach(g.held.q, err)
	g.held = held{}
}

// expireHeld refuses what waits once its head has waited past cutoff:
// nothing of it was appended, so the publisher may send it again.
func (g *Group) expireHeld(cutoff time.Time) {
	if len(g.held.q) > 0 && g.held.q[0].at.Before(cutoff) {
		g.refuseHeld(ErrProposalDropped)
	}
}
