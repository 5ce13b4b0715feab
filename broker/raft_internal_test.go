package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// An append carrying only a commit index is dropped when a later append
// of its group in the batch carries as high a one; everything else is sent
// in order.
func TestSupersedeDropsCommitOnlyAppendsALaterOneCovers(t *testing.T) {
	app := func(commit uint64, entries int) *pb.Message {
		m := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), Commit: proto.Uint64(commit)}
		for range entries {
			m.Entries = append(m.Entries, &pb.Entry{Data: []byte("x")})
		}
		return m
	}
	beat := &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), Commit: proto.Uint64(9)}
	envs := []raftEnvelope{
		{group: "a", msg: app(5, 0)}, // dropped: a's next carries 5
		{group: "b", msg: app(5, 0)}, // kept: b's later append carries 4
		{group: "a", msg: app(5, 2)},
		{group: "a", msg: beat},
		{group: "b", msg: app(4, 1)},
		{group: "a", msg: app(6, 0)}, // kept: the last of a
		{group: "c", msg: app(1, 0)}, // kept: alone
	}
	want := []raftEnvelope{envs[1], envs[2], envs[3], envs[4], envs[5], envs[6]}
	p := &raftPeer{later: map[string]uint64{}}
	got := p.supersede(envs)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].group, got[i].group, "message %d", i)
		require.Same(t, want[i].msg, got[i].msg, "message %d", i)
	}
	require.Nil(t, envs[len(got)].msg, "what is past the kept ones is cleared")
}
