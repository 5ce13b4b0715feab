package broker

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/replica"
)

// Reports to the control plane: the leader of each replicated shard tells
// it the group's voters, learners and in-sync voters with each keepalive
// (cmd/felix-broker gives ReplicaReports to the cluster agent), and at
// once when they change (ReplicasChanged), since the placer starts the
// next step of a replacement or a move only once it has seen the last one
// done.

// ReplicaReports returns a report of each replicated shard this broker
// leads, by shard; none when it leads none.
func (b *Broker) ReplicaReports() []cluster.ReplicaReport {
	out := []cluster.ReplicaReport{}
	for _, r := range b.raft.groupList() {
		s := r.group.Status()
		if s.Role != "leader" {
			continue
		}
		k := r.sh.st.spec.StreamKey
		out = append(out, cluster.ReplicaReport{
			Shard:  cluster.Shard{Tenant: k.Tenant, Namespace: k.Namespace, Stream: k.Stream, Shard: r.sh.id},
			Leader: b.cfg.NodeID, Term: s.Term,
			Voters: r.memberNames(s.Voters), Learners: r.memberNames(s.Learners), InSync: r.memberNames(inSync(s)),
		})
	}
	slices.SortFunc(out, func(a, b cluster.ReplicaReport) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Namespace, b.Namespace),
			strings.Compare(a.Stream, b.Stream), cmp.Compare(a.Shard.Shard, b.Shard.Shard))
	})
	return out
}

// ReplicasChanged receives a value when the report of a group this broker
// leads changed (or it took or lost a leadership) since the last one.
func (b *Broker) ReplicasChanged() <-chan struct{} { return b.raft.reportNow }

// noteReport is called by the raft ticker with the replica's status: when
// what it would report differs from the last time, the agent is told.
func (r *replicated) noteReport(s replica.Status) {
	var sum uint64
	if s.Role == "leader" {
		h := fnv.New64a()
		put := func(v uint64) { h.Write(binary.LittleEndian.AppendUint64(nil, v)) }
		put(s.Term)
		for _, ids := range [][]uint64{s.Voters, s.Learners, inSync(s)} {
			put(uint64(len(ids)))
			for _, id := range slices.Sorted(slices.Values(ids)) {
				put(id)
			}
		}
		sum = h.Sum64() | 1 // never 0, which is "not leading"
	}
	if sum == r.reportSum {
		return
	}
	r.reportSum = sum
	select {
	case r.sh.b.raft.reportNow <- struct{}{}:
	default: // one pending is enough: the keepalive reads every group
	}
}
