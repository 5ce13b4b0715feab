package broker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/replica"
	"github.com/felixmq/felix/wire"
)

// A proposal raft dropped (the leader MaxUncommittedBytes ahead of its
// commit, or handing its leadership over) is refused overloaded with
// retry_after, as a full publish queue is: this broker leads, so not_leader
// would send the client back to it.
func TestDroppedProposalRefusedOverloaded(t *testing.T) {
	r := &replicated{sh: &shard{st: &stream{spec: StreamSpec{StreamKey: StreamKey{Tenant: "t", Namespace: "n", Stream: "s"}}}, id: 2}}
	err := r.refusal(replica.ErrProposalDropped)
	require.ErrorIs(t, err, ErrOverloaded)
	var nl *notLeaderError
	require.False(t, errors.As(err, &nl))
	require.Equal(t, &wire.TypedError{Code: wire.CodeOverloaded, Retry: wire.RetryAfter, Reason: "publish_queue_full"}, typedError(err))
	require.Contains(t, err.Error(), "t/n/s")
}
