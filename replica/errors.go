package replica

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed: the group was closed.
	ErrClosed = errors.New("replica: group closed")
	// ErrLeadershipLost: the leader stepped down (or was replaced) before
	// a proposal it accepted was committed. The records may still be
	// committed by the next leader: the outcome is unknown.
	ErrLeadershipLost = errors.New("replica: leadership lost")
	// ErrQuorumTimeout: a proposal was not committed within
	// Config.QuorumTimeout. The outcome is unknown.
	ErrQuorumTimeout = errors.New("replica: quorum timeout")
	// ErrProposalDropped: a proposal refused, nothing appended: raft had
	// no room for it (the leader MaxUncommittedBytes ahead of its commit)
	// and MaxHeldBytes already waited for room, or it waited
	// QuorumTimeout; or it was queued behind one so refused. Send it again
	// later.
	ErrProposalDropped = errors.New("replica: proposal dropped (uncommitted and waiting entries at their limits)")
	// ErrInvalidConfig: a Config that cannot be used.
	ErrInvalidConfig = errors.New("replica: invalid config")
	// ErrCorruptState: the raft state file is damaged.
	ErrCorruptState = errors.New("replica: raft state corrupt")
)

// NotLeaderError refuses a proposal to a replica that is not the leader.
// Leader is the leader it knows of (0: none yet, an election is running).
type NotLeaderError struct {
	Leader uint64
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return fmt.Sprintf("replica: not the leader (term %d: no leader yet)", e.Term)
	}
	return fmt.Sprintf("replica: not the leader (term %d: leader %x)", e.Term, e.Leader)
}
