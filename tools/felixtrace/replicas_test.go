package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// replicated is a stream whose shards carry the given replicas.
func replicated(name string, rs ...*broker.ReplicaStats) broker.StreamStats {
	st := broker.StreamStats{StreamSpec: broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "ns", Stream: name},
		Shards: len(rs), Durable: true, Replicas: 3}}
	for i, r := range rs {
		st.Shards = append(st.Shards, broker.ShardStats{Shard: i, Replica: r})
	}
	return st
}

// Each replicated shard the broker holds a replica of gets a row: its
// role, term and leader, commit and applied index, pending proposals, the
// interval's quorum acks per second and their mean wait (from the
// broker's cumulative count and mean), and on a leader each follower's lag
// in records. The summary counts term and role changes over the run.
func TestReplicaRows(t *testing.T) {
	lead := func(acks uint64, meanMs float64, lag uint64) *broker.ReplicaStats {
		return &broker.ReplicaStats{Role: "leader", Term: 4, Leader: "b2", Commit: 1200, Applied: 1200, LastIndex: 1200 + lag,
			Pending: 3, QuorumAcks: acks, QuorumWaitMeanMs: meanMs,
			Followers: []broker.FollowerStats{{ID: "b1", Match: 1200, LagRecords: lag}, {ID: "b3", Match: 1200 + lag}}}
	}
	follower := &broker.ReplicaStats{Role: "follower", Term: 4, Leader: "b1", Commit: 80, Applied: 79, LastIndex: 80}
	prev := &broker.Stats{Time: t0, Streams: []broker.StreamStats{replicated("orders", lead(100, 2, 0), follower),
		{StreamSpec: broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "ns", Stream: "plain"}}, Shards: []broker.ShardStats{{}}}}}
	// 2 s later: 200 more quorum acks; the mean over all 300 fell from
	// 2 ms to 1.5 ms, so the interval's 200 waited 1.25 ms on average.
	cur := &broker.Stats{Time: t0.Add(2 * time.Second), Streams: []broker.StreamStats{replicated("orders", lead(300, 1.5, 7), follower)}}
	s := compute(prev, cur)
	require.Len(t, s.Replicas, 2, "one row per replica, none for a shard that is not replicated")
	r := s.Replicas[0]
	require.Equal(t, "t1/ns/orders#0", r.Shard)
	require.Equal(t, uint64(200), r.QuorumAcks)
	require.Equal(t, 100.0, r.QuorumAckRate)
	require.Equal(t, 1250*time.Microsecond, r.QuorumWait)
	require.Zero(t, s.Replicas[1].QuorumAcks)

	var out bytes.Buffer
	printSample(&out, &s, 8)
	screen := out.String()
	for _, want := range []string{
		"REPLICA                          ROLE           TERM LEADER          COMMIT   APPLIED PENDING  QACKS/s    QWAIT  FOLLOWERS (lag, records)\n",
		"t1/ns/orders#0                   leader            4 b2                1200      1200       3      100   1.25ms  b1 7, b3 0\n",
		"t1/ns/orders#1                   follower          4 b1                  80        79       0        0        -  -\n",
	} {
		require.Contains(t, screen, want)
	}

	// A reopened replica (its counts start again) is not a negative interval.
	again := compute(cur, &broker.Stats{Time: t0.Add(3 * time.Second), Streams: []broker.StreamStats{replicated("orders", lead(5, 1, 0))}})
	require.Equal(t, uint64(5), again.Replicas[0].QuorumAcks)
	require.Equal(t, time.Millisecond, again.Replicas[0].QuorumWait)

	// The leader is killed: this replica stands at term 5, then follows.
	m := newSummary(t0)
	m.add(&s)
	m.add(&again)
	next := *cur
	next.Streams = []broker.StreamStats{replicated("orders", &broker.ReplicaStats{Role: "follower", Term: 5, Leader: "b3",
		Commit: 1300, Applied: 1300, LastIndex: 1300, Failed: "segment: log failed"})}
	third := compute(cur, &next)
	m.add(&third)
	m.finish(next.Time)
	require.Equal(t, []ReplicaSummary{
		{Shard: "t1/ns/orders#0", Role: "follower", Term: 5, Leader: "b3", TermChanges: 1, RoleChanges: 1, QuorumAcks: 205,
			QuorumWait: (200*1250*time.Microsecond + 5*time.Millisecond) / 205, MaxLag: 7,
			waitTotal: 200*1250*time.Microsecond + 5*time.Millisecond},
		{Shard: "t1/ns/orders#1", Role: "follower", Term: 4, Leader: "b1"},
	}, m.Replicas)
	out.Reset()
	printSample(&out, &third, 8)
	require.Contains(t, out.String(), "FAILED: segment: log failed")
	out.Reset()
	printSummary(&out, m, 8)
	require.Contains(t, out.String(), "t1/ns/orders#0                   follower          5 b3                   1         1          205")

	// A broker holding no replica prints no REPLICA row.
	out.Reset()
	plain := compute(&broker.Stats{Time: t0}, &broker.Stats{Time: t0.Add(time.Second)})
	printSample(&out, &plain, 8)
	require.NotContains(t, out.String(), "REPLICA")
}
