package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/replica"
)

// TestLearnerInStepIsPromotedUnderLoad: a leader reads its followers'
// progress once per tick, and publishes append meanwhile. A learner as
// close as the voters is promoted however much was appended since the
// read: its lag counts from the leader's last index at the read (at the
// default 100 ms tick, 640 records/s of appends made every replica look
// more than 64 behind, and a replica move under load never ended).
func TestLearnerInStepIsPromotedUnderLoad(t *testing.T) {
	b1, b2, b3, b4 := raftID("b1"), raftID("b2"), raftID("b3"), raftID("b4")
	s := replica.Status{ID: b1, Role: "leader", Voters: []uint64{b1, b2, b3}, Learners: []uint64{b4},
		Match: map[uint64]uint64{b1: 1000, b2: 996, b3: 997, b4: 998}, MatchLast: 1000, LastIndex: 1300}
	target := []cluster.Member{{ID: "b1"}, {ID: "b2"}, {ID: "b4"}}
	live := func(uint64) bool { return true }
	kind, id, ok := nextStep(s, target, b1, live)
	require.True(t, ok)
	require.Equal(t, uint8(replica.Promote), kind)
	require.Equal(t, b4, id)
	require.Len(t, inSync(s), 3)

	s.Match[b4] = 1000 - readySlack - 1
	_, _, ok = nextStep(s, target, b1, live)
	require.False(t, ok, "a learner further behind than readySlack waits")
	lag, _ := s.Lag(b4)
	require.Equal(t, uint64(readySlack+1), lag)
}
