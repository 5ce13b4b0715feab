package broker

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// clusterMetrics count forwarding (cluster.go); the placement gauges read
// the broker. Atomics, so that /debug/felix/stats reads the same numbers
// Prometheus exports.
type clusterMetrics struct {
	forwardRequests atomic.Uint64
	forwardedEvents atomic.Uint64
	forwardedBytes  atomic.Uint64
	forwardErrors   atomic.Uint64
}

func (m *clusterMetrics) collectors(b *Broker) []prometheus.Collector {
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		counter("felix_forwarded_publishes_total",
			"Publishes (one per batch) forwarded to their shard's owner and accepted there.", &m.forwardRequests),
		counter("felix_forwarded_events_total",
			"Events forwarded to their shard's owner and accepted there.", &m.forwardedEvents),
		counter("felix_forwarded_bytes_total",
			"Payload bytes forwarded to their shard's owner and accepted there.", &m.forwardedBytes),
		counter("felix_forward_errors_total",
			"Publishes for another broker's shard that failed: not_owner, owner_unavailable or the owner's refusal.", &m.forwardErrors),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_placement_version",
			Help: "Version of the cluster placement in force; 0 in single-broker mode."},
			func() float64 { return float64(b.PlacementVersion()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_shards_owned",
			Help: "Shards this broker serves: those the placement assigns it, or every registered shard in single-broker mode."},
			func() float64 { return float64(b.shardsOwned()) }),
	}
}

func (m *clusterMetrics) forwarded(events, bytes int) {
	m.forwardRequests.Add(1)
	m.forwardedEvents.Add(uint64(events))
	m.forwardedBytes.Add(uint64(bytes))
}

// shardsOwned counts the shards this broker serves.
func (b *Broker) shardsOwned() int {
	if v := b.placement.Load(); v != nil {
		return v.owned
	}
	n := 0
	for _, st := range b.streams.list() {
		n += len(st.shards)
	}
	return n
}

// ClusterStats is the cluster part of /debug/felix/stats.
type ClusterStats struct {
	NodeID             string `json:"node_id,omitempty"`
	PlacementVersion   int64  `json:"placement_version"`
	ShardsOwned        int    `json:"shards_owned"`
	ForwardedPublishes uint64 `json:"forwarded_publishes"`
	ForwardedEvents    uint64 `json:"forwarded_events"`
	ForwardedBytes     uint64 `json:"forwarded_bytes"`
	ForwardErrors      uint64 `json:"forward_errors"`
}

// ClusterStats returns the broker's placement and forwarding counters.
func (b *Broker) ClusterStats() ClusterStats {
	m := &b.metrics.cluster
	return ClusterStats{
		NodeID: b.cfg.NodeID, PlacementVersion: b.PlacementVersion(), ShardsOwned: b.shardsOwned(),
		ForwardedPublishes: m.forwardRequests.Load(), ForwardedEvents: m.forwardedEvents.Load(),
		ForwardedBytes: m.forwardedBytes.Load(), ForwardErrors: m.forwardErrors.Load(),
	}
}
