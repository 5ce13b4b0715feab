package cluster

// ReplicaReport is a replicated shard's raft group as its leader sees it,
// sent with the leader's keepalive.
// The control plane keeps each member's last report; per shard the report
// of the highest term counts (one by a member that is not live does not),
// and the placement's assignment shows its Voters, Learners and InSync
// (Assignment).
type ReplicaReport struct {
	Shard
	// Leader is the reporting member, leader of the group in Term.
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
	// Voters and Learners are the group's membership (the leader among
	// the voters).
	Voters   []string `json:"voters"`
	Learners []string `json:"learners,omitempty"`
	// InSync are the voters whose log is caught up with the leader's
	// (within a small lag), the leader included.
	InSync []string `json:"in_sync"`
}
