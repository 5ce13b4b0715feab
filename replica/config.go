package replica

import (
	"fmt"
	"log/slog"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/felixmq/felix/segment"
)

// Transport carries raft messages to the other replicas. Send must not
// block: a message it cannot deliver is dropped (raft sends again), and a
// peer it cannot reach should be reported with Group.ReportUnreachable.
type Transport interface {
	Send(msgs []*pb.Message)
}

// Config configures a Group. Zero values mean the documented defaults.
type Config struct {
	// ID is this replica's raft id; not 0.
	ID uint64
	// Peers are the voters a new group starts with (this replica among
	// them). A group whose state file exists keeps the membership it
	// holds.
	Peers []uint64
	// Learners, with Peers the group's voters as last known, open a new
	// replica that joins a group already running, as one of its learners
	// (the leader added it): it takes no part in elections until the
	// leader promotes it. Ignored when the state file exists.
	Learners []uint64
	// Dir is the shard's directory; the state file lives there.
	Dir string
	// Log is the shard's log, opened with FormatVersion v4 and
	// KeepPartialBatches. The group appends to it; its owner reads it.
	Log *segment.Log
	// FS is the file system of the state file; nil: the operating system's.
	FS segment.FS
	// SyncEachWrite syncs what the replica appends before it counts (the
	// on_commit fsync mode); without it, writes count once written.
	SyncEachWrite bool
	// Transport sends raft's messages.
	Transport Transport
	// Apply is told, in log order, of committed records: the events
	// (generation records are left out) and tail, the offset after the
	// last committed record. Called on the group's goroutine.
	Apply func(events []segment.Record, tail uint64)
	// OnLeader is told when this replica becomes the leader (true) or stops
	// being it (false), on the group's goroutine, before anything of the
	// new role is proposed or answered; nil: not told.
	OnLeader func(leader bool)
	// ElectionTicks and HeartbeatTicks are raft's timeouts in Ticks:
	// defaults 10 and 1.
	ElectionTicks, HeartbeatTicks int
	// MaxSizePerMsg bounds an append message (default 1 MiB);
	// MaxInflightMsgs the appends in flight to one follower (default
	// 256); MaxUncommittedBytes what a leader accepts beyond its commit
	// before proposals wait (default 64 MiB).
	MaxSizePerMsg       uint64
	MaxInflightMsgs     int
	MaxUncommittedBytes uint64
	// MaxHeldBytes bounds the proposals a leader holds, in order, until
	// raft has room for them (admission.go); beyond it they are refused
	// ErrProposalDropped. Default MaxUncommittedBytes.
	MaxHeldBytes uint64
	// QuorumTimeout fails a proposal not committed in that long with
	// ErrQuorumTimeout (default 5 s).
	QuorumTimeout time.Duration
	// CommitSaveInterval is how often the commit index is saved when it
	// is the only change (default 1 s).
	CommitSaveInterval time.Duration
	// Now is the clock (proposal ages); nil: time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = 256
	}
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = 64 << 20
	}
	if c.MaxHeldBytes == 0 {
		c.MaxHeldBytes = c.MaxUncommittedBytes
	}
	if c.QuorumTimeout == 0 {
		c.QuorumTimeout = 5 * time.Second
	}
	if c.CommitSaveInterval == 0 {
		c.CommitSaveInterval = time.Second
	}
	if c.FS == nil {
		c.FS = segment.OSFS{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Apply == nil {
		c.Apply = func([]segment.Record, uint64) {}
	}
	if c.OnLeader == nil {
		c.OnLeader = func(bool) {}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.ID == 0:
		return fmt.Errorf("%w: ID 0", ErrInvalidConfig)
	case c.Log == nil || c.Transport == nil:
		return fmt.Errorf("%w: Log and Transport are required", ErrInvalidConfig)
	case c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("%w: ElectionTicks %d must exceed HeartbeatTicks %d", ErrInvalidConfig, c.ElectionTicks, c.HeartbeatTicks)
	}
	return nil
}
