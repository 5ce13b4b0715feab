package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/felixmq/felix/segment"
)

// raftMetrics are replication's: what the transport sent and dropped, and
// per replicated shard this broker holds a replica of, its raft state
// (one series per shard: bounded by the replicas placed here).
type raftMetrics struct {
	catchUpThrottled prometheus.Counter
	catchUpBytes     prometheus.Counter
	dropped          prometheus.Counter
	sentMessages     prometheus.Counter
	sentBytes        prometheus.Counter
	// appendMessages and appendEntries are the MsgApps sent and the
	// entries they carried: their ratio is raft's batching. A leader also
	// sends empty ones that only move a follower's commit index (label
	// empty="true").
	appendMessages            *prometheus.CounterVec
	appendsFull, appendsEmpty prometheus.Counter
	appendEntries             prometheus.Counter
	elections                 prometheus.Counter
	quorumLatency             prometheus.Histogram
}

func newRaftMetrics() raftMetrics {
	m := raftMetrics{
		catchUpThrottled: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_raft_catchup_throttled_total",
			Help: "Appends to a replica being added (a learner) held back by FELIX_RAFT_CATCHUP_BYTES_PER_SEC (raft sends them again)."}),
		catchUpBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_raft_catchup_bytes_total",
			Help: "Entry bytes sent to replicas being added (learners)."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_raft_messages_dropped_total",
			Help: "Raft messages dropped: a peer's send queue full or unreachable, or a message for a group this broker does not hold (raft sends again)."}),
		sentMessages: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_raft_messages_sent_total",
			Help: "Raft messages sent to other brokers."}),
		sentBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_raft_sent_bytes_total",
			Help: "Bytes of raft batches sent to other brokers."}),
		appendMessages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_raft_append_messages_total",
			Help: "Raft append messages (MsgApp) sent to other brokers; empty=\"true\": carrying no entries (a commit index only)."},
			[]string{"empty"}),
		appendEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_raft_append_entries_total",
			Help: "Entries carried by the raft append messages sent to other brokers."}),
		elections: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_raft_leaderships_won_total",
			Help: "Times a replica on this broker became its shard's leader."}),
		quorumLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "felix_raft_quorum_ack_seconds",
			Help:    "Time from a quorum publish reaching its shard's leader to its commit.",
			Buckets: latencyBuckets}),
	}
	m.appendsFull, m.appendsEmpty = m.appendMessages.WithLabelValues("false"), m.appendMessages.WithLabelValues("true")
	return m
}

func (m raftMetrics) sent(envs []raftEnvelope, bytes int) {
	m.sentMessages.Add(float64(len(envs)))
	m.sentBytes.Add(float64(bytes))
	full, empty, ents := 0, 0, 0
	for _, e := range envs {
		if e.msg.GetType() != pb.MessageType_MsgApp {
			continue
		}
		if n := len(e.msg.GetEntries()); n > 0 {
			full++
			ents += n
		} else {
			empty++
		}
	}
	m.appendsFull.Add(float64(full))
	m.appendsEmpty.Add(float64(empty))
	m.appendEntries.Add(float64(ents))
}

func (m raftMetrics) collectors(b *Broker) []prometheus.Collector {
	return []prometheus.Collector{m.catchUpThrottled, m.catchUpBytes, m.dropped, m.sentMessages, m.sentBytes, m.appendMessages, m.appendEntries,
		m.elections, m.quorumLatency, raftCollector{b}}
}

var (
	raftLabels    = []string{"tenant", "namespace", "stream", "shard"}
	raftRoleDesc  = prometheus.NewDesc("felix_raft_leader", "1 when this broker's replica leads the shard, else 0.", raftLabels, nil)
	raftTermDesc  = prometheus.NewDesc("felix_raft_term", "The replica's raft term.", raftLabels, nil)
	raftCommitDsc = prometheus.NewDesc("felix_raft_commit_index", "The replica's commit index (offset + 1).", raftLabels, nil)
	raftApplyDesc = prometheus.NewDesc("felix_raft_applied_index", "The last index delivered to subscribers.", raftLabels, nil)
	raftLagDesc   = prometheus.NewDesc("felix_raft_follower_lag_records",
		"On a leader: records a follower's log was behind the leader's last index when the leader last read its progress (once per raft tick).",
		append(raftLabels, "follower"), nil)
	raftSyncsDesc  = prometheus.NewDesc("felix_raft_log_syncs_total", "Syncs of the replica's log (on_commit streams).", raftLabels, nil)
	raftSyncedDesc = prometheus.NewDesc("felix_raft_log_synced_records_total",
		"Records (raft entries) the replica's log syncs made durable.", raftLabels, nil)
	raftInSyncDesc = prometheus.NewDesc("felix_raft_in_sync_replicas",
		"On a leader: the voters caught up with it (itself included).", raftLabels, nil)
	raftUnderDesc = prometheus.NewDesc("felix_raft_under_replicated_shards",
		"Shards this broker leads with fewer voters in sync than the placement's replica set has members.", nil, nil)
	raftLearnersDesc = prometheus.NewDesc("felix_raft_learners",
		"On a leader: replicas being added (learners, catching up).", raftLabels, nil)
	raftSyncSecondsDesc = prometheus.NewDesc("felix_raft_log_sync_seconds",
		"Duration of each sync of a replica's log, over the broker's replicas (a quorum ack waits for a majority's).", nil, nil)
)

type raftCollector struct{ b *Broker }

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{raftRoleDesc, raftTermDesc, raftCommitDsc, raftApplyDesc, raftLagDesc, raftSyncsDesc, raftSyncedDesc, raftInSyncDesc, raftUnderDesc, raftLearnersDesc, raftSyncSecondsDesc} {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	under := 0
	var syncs segment.Histogram
	defer func() {
		ch <- prometheus.MustNewConstMetric(raftUnderDesc, prometheus.GaugeValue, float64(under))
		ch <- segmentHistogram(raftSyncSecondsDesc, syncs)
	}()
	for _, r := range c.b.raft.groupList() {
		syncs = syncs.Add(r.log.Stats().SyncDuration)
		s := r.group.Status()
		k := r.sh.st.spec.StreamKey
		lv := []string{k.Tenant, k.Namespace, k.Stream, strconv.Itoa(r.sh.id)}
		lead := 0.0
		if s.Role == "leader" {
			lead = 1
		}
		ch <- prometheus.MustNewConstMetric(raftRoleDesc, prometheus.GaugeValue, lead, lv...)
		ch <- prometheus.MustNewConstMetric(raftTermDesc, prometheus.GaugeValue, float64(s.Term), lv...)
		ch <- prometheus.MustNewConstMetric(raftCommitDsc, prometheus.GaugeValue, float64(s.Commit), lv...)
		ch <- prometheus.MustNewConstMetric(raftApplyDesc, prometheus.GaugeValue, float64(s.Applied), lv...)
		ch <- prometheus.MustNewConstMetric(raftSyncsDesc, prometheus.CounterValue, float64(s.Syncs), lv...)
		ch <- prometheus.MustNewConstMetric(raftSyncedDesc, prometheus.CounterValue, float64(s.SyncedRecords), lv...)
		if s.Role == "leader" {
			n := len(inSync(s))
			ch <- prometheus.MustNewConstMetric(raftInSyncDesc, prometheus.GaugeValue, float64(n), lv...)
			ch <- prometheus.MustNewConstMetric(raftLearnersDesc, prometheus.GaugeValue, float64(len(s.Learners)), lv...)
			if t := r.target.Load(); t != nil && n < len(*t) {
				under++
			}
		}
		for id := range s.Match {
			if id == s.ID {
				continue
			}
			lag, _ := s.Lag(id)
			ch <- prometheus.MustNewConstMetric(raftLagDesc, prometheus.GaugeValue, float64(lag), append(lv, r.memberName(id))...)
		}
	}
}

// segmentHistogram is h as a Prometheus histogram in seconds: bucket i of
// a segment histogram holds durations below segment.BucketBound(i), the
// last one all the rest.
func segmentHistogram(d *prometheus.Desc, h segment.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Counts))
	var cum uint64
	for i, n := range h.Counts[:max(len(h.Counts)-1, 0)] {
		cum += n
		buckets[segment.BucketBound(i).Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets)
}
