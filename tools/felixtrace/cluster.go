package main

import (
	"fmt"
	"io"
	"time"

	"github.com/felixmq/felix/broker"
)

// ClusterSample is the broker's cluster mode over the interval: its
// placement (gauges) and what it forwarded to other shards' owners (counts).
type ClusterSample struct {
	NodeID           string  `json:"node_id,omitempty"`
	PlacementVersion int64   `json:"placement_version"`
	ShardsOwned      int     `json:"shards_owned"`
	Forwarded        uint64  `json:"forwarded_publishes"`
	ForwardedEvents  uint64  `json:"forwarded_events"`
	ForwardedBytes   uint64  `json:"forwarded_bytes"`
	ForwardedRate    float64 `json:"forwarded_bytes_per_s"`
	ForwardErrors    uint64  `json:"forward_errors"`
}

func clusterSample(prev, cur *broker.Stats, d time.Duration) ClusterSample {
	p, c := prev.Cluster, cur.Cluster
	s := ClusterSample{
		NodeID: c.NodeID, PlacementVersion: c.PlacementVersion, ShardsOwned: c.ShardsOwned,
		Forwarded:       sub(c.ForwardedPublishes, p.ForwardedPublishes),
		ForwardedEvents: sub(c.ForwardedEvents, p.ForwardedEvents),
		ForwardedBytes:  sub(c.ForwardedBytes, p.ForwardedBytes),
		ForwardErrors:   sub(c.ForwardErrors, p.ForwardErrors),
	}
	s.ForwardedRate = perSecond(s.ForwardedBytes, d)
	return s
}

// clustered: the broker runs with a placement (single-broker mode prints
// no cluster line).
func (s *ClusterSample) clustered() bool { return s.NodeID != "" || s.PlacementVersion != 0 }

func printClusterSample(w io.Writer, s *ClusterSample) {
	if !s.clustered() {
		return
	}
	fmt.Fprintf(w, "%-9s node %s  placement v%d  shards owned %d  forwarded %d (%s events, %s)  errors %d\n",
		"CLUSTER", s.NodeID, s.PlacementVersion, s.ShardsOwned, s.Forwarded, fmtCount(float64(s.ForwardedEvents)),
		fmtRate(s.ForwardedRate), s.ForwardErrors)
}

// ClusterSummary is forwarding over the run and the last placement seen.
type ClusterSummary struct {
	NodeID           string  `json:"node_id,omitempty"`
	PlacementVersion int64   `json:"placement_version"`
	PlacementChanges int     `json:"placement_changes"`
	ShardsOwned      int     `json:"shards_owned"`
	Forwarded        uint64  `json:"forwarded_publishes"`
	ForwardedBytes   uint64  `json:"forwarded_bytes"`
	ForwardedRate    MeanMax `json:"forwarded_bytes_per_s"`
	ForwardErrors    uint64  `json:"forward_errors"`
}

func (c *ClusterSummary) add(s *ClusterSample) {
	if c.PlacementVersion != 0 && s.PlacementVersion != c.PlacementVersion {
		c.PlacementChanges++
	}
	c.NodeID, c.PlacementVersion, c.ShardsOwned = s.NodeID, s.PlacementVersion, s.ShardsOwned
	c.Forwarded += s.Forwarded
	c.ForwardedBytes += s.ForwardedBytes
	c.ForwardedRate.add(s.ForwardedRate)
	c.ForwardErrors += s.ForwardErrors
}

func printClusterSummary(w io.Writer, c *ClusterSummary) {
	if c.NodeID == "" && c.PlacementVersion == 0 {
		return
	}
	fmt.Fprintf(w, "%-9s node %s  placement v%d (%d changes)  shards owned %d  forwarded %d, %s (%s mean, %s max)  errors %d\n",
		"CLUSTER", c.NodeID, c.PlacementVersion, c.PlacementChanges, c.ShardsOwned, c.Forwarded,
		fmtBytes(float64(c.ForwardedBytes)), fmtRate(c.ForwardedRate.Mean), fmtRate(c.ForwardedRate.Max), c.ForwardErrors)
}
