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
