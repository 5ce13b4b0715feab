package cluster

import "errors"

// ErrOwnerUnavailable: a shard's owner is not live (a durable shard waits
// for its owner, whose disk holds its data) or could not be reached. The
// publish was not acked and not applied anywhere else. Its text is the
// wire error code that leads the broker's refusal, so it carries no
// package prefix. The broker and the forwarder (client/forward) both
// import this package, so both wrap the same sentinel.
var ErrOwnerUnavailable = errors.New("owner_unavailable")

// ErrUnacknowledged: a publish whose outcome is unknown: it was handed on
// (forwarded to the shard's owner) and no answer came back, so it may or
// may not have been applied. Only an idempotent re-send is safe. The
// forwarder returns it and the broker codes it, so it lives here, where
// both can import it.
var ErrUnacknowledged = errors.New("unacknowledged")

// The refusals of a manual change of a replica set (Placement.MoveReplica,
// Placement.PreferLeader).
var (
	// ErrNoShard: the placement has no replicated shard of that name.
	ErrNoShard = errors.New("cluster: no such replicated shard")
	// ErrShardMoving: the shard's group has not caught up with its
	// previous target set; one move at a time.
	ErrShardMoving = errors.New("cluster: shard is moving")
	// ErrBadMove: the shard's set or the members do not allow the change.
	ErrBadMove = errors.New("cluster: change not allowed")
)

// ChangeError is a refused manual change of shard Shard's replica set: Err
// is ErrNoShard, ErrShardMoving or ErrBadMove, Reason says why.
type ChangeError struct {
	Err    error
	Shard  Shard
	Reason string
}

func (e *ChangeError) Error() string {
	msg := e.Err.Error() + ": " + e.Shard.String()
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Is makes a ChangeError match its Err.
func (e *ChangeError) Is(target error) bool { return target == e.Err }
