package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// One ack call may name records of several shards: they go as one request
// per shard, shards in order of first appearance, offsets in call order.
func TestByShardGroupsRefsPerShard(t *testing.T) {
	refs := []QueueRef{{Shard: 2, Offset: 7}, {Shard: 0, Offset: 1}, {Shard: 2, Offset: 3}, {Shard: 0, Offset: 0}}
	require.Equal(t, []shardOffsets{{shard: 2, offsets: []uint64{7, 3}}, {shard: 0, offsets: []uint64{1, 0}}}, byShard(refs))
	require.Equal(t, []shardOffsets{{}}, byShard(nil), "no refs: one empty request, which the broker refuses")
	require.Equal(t, QueueRef{Shard: 4, Offset: 9}, QueueMessage{Shard: 4, Offset: 9, Payload: []byte("x")}.Ref())
}
