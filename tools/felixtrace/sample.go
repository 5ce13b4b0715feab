package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/cpuprofile"
)

// Sample is what happened on the broker between two scrapes. Counts (lost,
// bytes, syncs, drops) are for the interval; gauges (RTT, MTU, depth) are
// as of its end.
type Sample struct {
	// Time is the broker's clock at the second scrape.
	Time     time.Time     `json:"time"`
	Interval time.Duration `json:"interval_ns"`
	// Connections, busiest (bytes in + out) first.
	Connections []ConnSample `json:"connections"`
	// Streams, busiest (published + delivered) first.
	Streams  []StreamSample `json:"streams"`
	Features FeatureSample  `json:"features"`
	// Roles counts the broker's goroutines by pprof label.
	Roles map[string]int `json:"roles,omitempty"`
	// Process and Threads are absent when the broker cannot read its CPU
	// (CPUUnavailable says why). Threads are busiest first.
	Process        *ProcessSample `json:"process,omitempty"`
	Threads        []ThreadSample `json:"threads,omitempty"`
	CPUUnavailable string         `json:"cpu_unavailable,omitempty"`
	Commit         CommitSample   `json:"commit"`
	Fanout         FanoutSample   `json:"fanout"`
	Cluster        ClusterSample  `json:"cluster"`
	// Replicas are this broker's replicas of replicated shards, by shard.
	Replicas []ReplicaSample `json:"replicas,omitempty"`
	System   *SystemSample   `json:"system,omitempty"`
	// BPF is present with --bpf when the probes run.
	BPF *BPFSample `json:"bpf,omitempty"`

	// The interval's histograms, for the summary's means and quantiles
	// over the run.
	waiters, records, syncLatency commit.HistogramSnapshot
	blockIO                       cpuprofile.BlockIOHist
}

// ConnSample is one client connection.
type ConnSample struct {
	ID     uint64 `json:"id"`
	Remote string `json:"remote"`
	// Tenant and Principal of its credential; Role is peer (a broker
	// forwarding), publisher, subscriber, publisher+subscriber or client;
	// Streams what it publishes to or follows.
	Tenant    string   `json:"tenant,omitempty"`
	Principal string   `json:"principal,omitempty"`
	Role      string   `json:"role,omitempty"`
	Streams   []string `json:"streams,omitempty"`
	// RTT is quic-go's smoothed RTT, MinRTT the least seen.
	RTT    time.Duration `json:"rtt_ns"`
	MinRTT time.Duration `json:"min_rtt_ns"`
	MTU    int           `json:"mtu"`
	// Lost counts packets the broker declared lost in the interval;
	// CongestionEvents its congestion controller's entries into recovery.
	Lost             uint64 `json:"lost"`
	CongestionEvents uint64 `json:"congestion_events"`
	CongestionState  string `json:"congestion_state"`
	CongestionWindow uint64 `json:"congestion_window"`
	// BytesIn is what the broker received in the interval, BytesOut what
	// it sent, and the rates are the same per second.
	BytesIn       uint64  `json:"bytes_in"`
	BytesOut      uint64  `json:"bytes_out"`
	BytesInRate   float64 `json:"bytes_in_per_s"`
	BytesOutRate  float64 `json:"bytes_out_per_s"`
	Subscriptions int     `json:"subscriptions"`
	// New is set for a connection the previous scrape did not have: its
	// counts are since it opened.
	New bool `json:"new,omitempty"`
}

// ProcessSample is the broker process's CPU, % of one CPU.
type ProcessSample struct {
	CPU     float64 `json:"cpu_pct"`
	User    float64 `json:"user_pct"`
	System  float64 `json:"system_pct"`
	Threads int     `json:"threads"`
}

// ThreadSample is one OS thread of the broker, % of one CPU.
type ThreadSample struct {
	TID    int     `json:"tid"`
	Name   string  `json:"name"`
	CPU    float64 `json:"cpu_pct"`
	User   float64 `json:"user_pct"`
	System float64 `json:"system_pct"`
}

// CommitSample is group commit over every durable shard.
type CommitSample struct {
	DurableShards int     `json:"durable_shards"`
	Syncs         uint64  `json:"syncs"`
	SyncsRate     float64 `json:"syncs_per_s"`
	SyncErrors    uint64  `json:"sync_errors"`
	Records       uint64  `json:"records"`
	// WaitersPerSync is the mean number of publish batches one sync
	// released (0 unless on_commit); RecordsPerSync the records it covered.
	WaitersPerSync float64 `json:"waiters_per_sync"`
	RecordsPerSync float64 `json:"records_per_sync"`
	// Sync latency over the interval's syncs; the quantiles are upper
	// bounds (power-of-two buckets, at most twice the true value).
	SyncMean time.Duration `json:"sync_mean_ns"`
	SyncP50  time.Duration `json:"sync_p50_ns"`
	SyncP99  time.Duration `json:"sync_p99_ns"`
}

// FanoutSample is the subscriber queues.
type FanoutSample struct {
	Subscriptions int `json:"subscriptions"`
	// MaxDepth is the deepest queue (events) at the scrape and
	// MaxDepthCapacity that queue's capacity; TotalDepth sums them all.
	MaxDepth         int `json:"max_depth"`
	MaxDepthCapacity int `json:"max_depth_capacity"`
	TotalDepth       int `json:"total_depth"`
	// Drops counts events the broker dropped in the interval (every
	// subscriber, ended ones included), DropRate the same per second.
	Drops         uint64  `json:"drops"`
	DropRate      float64 `json:"drops_per_s"`
	Delivered     uint64  `json:"delivered"`
	DeliveredRate float64 `json:"delivered_per_s"`
}

// SystemSample is the CPU split of the broker's host, % of all its CPUs.
type SystemSample struct {
	CPUs    int     `json:"cpus"`
	User    float64 `json:"user_pct"`
	System  float64 `json:"system_pct"`
	IRQ     float64 `json:"irq_pct"`
	SoftIRQ float64 `json:"softirq_pct"`
	IOWait  float64 `json:"iowait_pct"`
	Steal   float64 `json:"steal_pct"`
	Idle    float64 `json:"idle_pct"`
}

// noCPU is the reason for a scrape without a CPU account that gives none
// (a broker older than the account).
const noCPU = "the broker sent no CPU account"

// sub is a counter delta that reads a reset (a restarted broker) as zero.
func sub(cur, prev uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// compute derives a Sample from two scrapes of one broker, prev first.
func compute(prev, cur *broker.Stats) Sample {
	s := Sample{Time: cur.Time, Interval: cur.Time.Sub(prev.Time)}
	s.Connections = connSamples(prev, cur, s.Interval)
	s.Commit, s.waiters, s.records, s.syncLatency = commitSample(prev, cur, s.Interval)
	s.Fanout = fanoutSample(prev, cur, s.Interval)
	s.Cluster = clusterSample(prev, cur, s.Interval)
	s.Replicas = replicaSamples(prev, cur, s.Interval)
	s.Streams = streamSamples(prev, cur, s.Interval)
	s.Features = featureSample(prev, cur, s.Interval)
	s.Roles = cur.Goroutines
	switch {
	case cur.CPU == nil:
		s.CPUUnavailable = cmp.Or(cur.CPUUnavailable, noCPU)
	case prev.CPU == nil:
		s.CPUUnavailable = "no CPU account in the previous scrape"
	default:
		cpuSample(&s, cpuprofile.Delta(*prev.CPU, *cur.CPU), len(cur.CPU.Threads))
	}
	return s
}

func connSamples(prev, cur *broker.Stats, d time.Duration) []ConnSample {
	before := map[uint64]broker.ConnectionStats{}
	for _, c := range prev.Connections {
		before[c.ID] = c
	}
	out := make([]ConnSample, 0, len(cur.Connections))
	for _, c := range cur.Connections {
		p, seen := before[c.ID]
		cs := ConnSample{
			ID: c.ID, Remote: c.Remote, Tenant: c.Tenant, Principal: c.Principal, Role: c.Role, Streams: c.Streams,
			RTT: c.SmoothedRTT, MinRTT: c.MinRTT, MTU: c.Path.MTU,
			Lost:             sub(c.PacketsLost, p.PacketsLost),
			CongestionEvents: sub(c.Path.CongestionEvents, p.Path.CongestionEvents),
			CongestionState:  c.Path.CongestionState, CongestionWindow: c.CongestionWnd,
			BytesIn: sub(c.BytesReceived, p.BytesReceived), BytesOut: sub(c.BytesSent, p.BytesSent),
			Subscriptions: len(c.Subscriptions), New: !seen,
		}
		cs.BytesInRate, cs.BytesOutRate = perSecond(cs.BytesIn, d), perSecond(cs.BytesOut, d)
		out = append(out, cs)
	}
	slices.SortStableFunc(out, func(a, b ConnSample) int { return cmp.Compare(b.BytesIn+b.BytesOut, a.BytesIn+a.BytesOut) })
	return out
}

func shardKey(st broker.StreamStats, shard int) string {
	return fmt.Sprintf("%s/%s/%s#%d", st.Tenant, st.Namespace, st.Stream, shard)
}

// commitSample sums the interval's group commit over the durable shards;
// it also returns the interval's histograms of waiters and records per
// sync and of sync latency.
func commitSample(prev, cur *broker.Stats, d time.Duration) (cs CommitSample, waiters, records, latency commit.HistogramSnapshot) {
	before := map[string]*broker.CommitStats{}
	for _, st := range prev.Streams {
		for _, sh := range st.Shards {
			before[shardKey(st, sh.Shard)] = sh.Commit
		}
	}
	for _, st := range cur.Streams {
		for _, sh := range st.Shards {
			c := sh.Commit
			if c == nil {
				continue
			}
			cs.DurableShards++
			p := before[shardKey(st, sh.Shard)]
			if p == nil || c.Syncs < p.Syncs {
				p = &broker.CommitStats{} // new since the last scrape, or reopened
			}
			cs.Syncs += sub(c.Syncs, p.Syncs)
			cs.SyncErrors += sub(c.SyncErrors, p.SyncErrors)
			cs.Records += sub(c.Records, p.Records)
			waiters = addHist(waiters, c.WaitersPerSync.Snapshot().Sub(p.WaitersPerSync.Snapshot()))
			records = addHist(records, c.RecordsPerSync.Snapshot().Sub(p.RecordsPerSync.Snapshot()))
			latency = addHist(latency, c.SyncLatency.Snapshot().Sub(p.SyncLatency.Snapshot()))
		}
	}
	cs.SyncsRate = perSecond(cs.Syncs, d)
	cs.WaitersPerSync, cs.RecordsPerSync = waiters.Mean(), records.Mean()
	cs.SyncMean = time.Duration(latency.Mean())
	cs.SyncP50, cs.SyncP99 = time.Duration(latency.Quantile(0.5)), time.Duration(latency.Quantile(0.99))
	return cs, waiters, records, latency
}

func addHist(a, b commit.HistogramSnapshot) commit.HistogramSnapshot {
	a.Count += b.Count
	a.Sum += b.Sum
	for i := range a.Buckets {
		a.Buckets[i] += b.Buckets[i]
	}
	return a
}

func fanoutSample(prev, cur *broker.Stats, d time.Duration) FanoutSample {
	type key struct{ conn, sub uint64 }
	delivered := map[key]uint64{}
	for _, c := range prev.Connections {
		for _, s := range c.Subscriptions {
			delivered[key{c.ID, s.ID}] = s.Queue.Delivered
		}
	}
	f := FanoutSample{Drops: sub(cur.DroppedEvents, prev.DroppedEvents)}
	for _, c := range cur.Connections {
		for _, s := range c.Subscriptions {
			f.Subscriptions++
			f.TotalDepth += s.Queue.Depth
			if f.Subscriptions == 1 || s.Queue.Depth > f.MaxDepth {
				f.MaxDepth, f.MaxDepthCapacity = s.Queue.Depth, s.Capacity
			}
			f.Delivered += sub(s.Queue.Delivered, delivered[key{c.ID, s.ID}])
		}
	}
	f.DeliveredRate, f.DropRate = perSecond(f.Delivered, d), perSecond(f.Drops, d)
	return f
}

func pct(rate float64) float64 { return 100 * rate }

func cpuSample(s *Sample, d cpuprofile.Sample, threads int) {
	s.Process = &ProcessSample{
		CPU: pct(d.Process.User + d.Process.System), User: pct(d.Process.User), System: pct(d.Process.System),
		Threads: threads,
	}
	s.Threads = make([]ThreadSample, 0, len(d.Threads))
	for _, t := range d.Threads {
		s.Threads = append(s.Threads, ThreadSample{
			TID: t.TID, Name: t.Name, CPU: pct(t.User + t.System), User: pct(t.User), System: pct(t.System),
		})
	}
	slices.SortStableFunc(s.Threads, func(a, b ThreadSample) int { return cmp.Compare(b.CPU, a.CPU) })
	if n := len(d.CPUs); n > 0 {
		all := func(rate float64) float64 { return pct(rate) / float64(n) }
		s.System = &SystemSample{
			CPUs: n, User: all(d.System.User), System: all(d.System.System), IRQ: all(d.System.IRQ),
			SoftIRQ: all(d.System.SoftIRQ), IOWait: all(d.System.IOWait), Steal: all(d.System.Steal), Idle: all(d.System.Idle),
		}
	}
}
