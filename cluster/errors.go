package cluster

import "errors"

// ErrOwnerUnavailable: a shard's owner is not live (a durable shard waits
// for its owner, whose disk holds its data) or could not be reached. The
// publish was not acked and not applied anywhere else. Its text is the
// wire error code that leads the broker's refusal, so it carries no
// package prefix. The broker and the forwarder (client/forward) both
// import this package, so both wrap the same sentinel.
var ErrOwnerUnavailable = errors.New("owner_unavailable")
