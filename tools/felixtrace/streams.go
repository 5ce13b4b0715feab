package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/felixmq/felix/broker"
)

// StreamSample is one stream's traffic in the interval (the broker's
// per-stream series: streams past its series bound show as
// _other/_other/_other). Rates are per second.
type StreamSample struct {
	Stream        string  `json:"stream"` // tenant/namespace/stream
	PublishRate   float64 `json:"publish_events_per_s"`
	PublishBytes  float64 `json:"publish_bytes_per_s"`
	PublishErrors uint64  `json:"publish_errors"`
	// AckRate is acked batches per second; the latency quantiles are over
	// them, upper bounds of the broker's buckets (10 µs, 25 µs, 50 µs ...).
	AckRate       float64       `json:"acks_per_s"`
	AckP50        time.Duration `json:"ack_p50_ns"`
	AckP99        time.Duration `json:"ack_p99_ns"`
	DeliveredRate float64       `json:"delivered_events_per_s"`
	DropRate      float64       `json:"drops_per_s"`
	Subscribers   int           `json:"subscribers"`

	// The interval's counts and ack-latency buckets (not cumulative), for
	// the summary.
	published, acks, delivered, drops uint64
	ackBounds                         []float64
	ackCounts                         []uint64
}

// FeatureSample is caches, rosters and consumer groups: operations per
// second in the interval, sizes at its end.
type FeatureSample struct {
	Caches        int                `json:"caches"`
	CacheEntries  int                `json:"cache_entries"`
	CacheWatchers int                `json:"cache_watchers"`
	CacheOpsRate  map[string]float64 `json:"cache_ops_per_s"`
	WatchRate     float64            `json:"watch_events_per_s"`
	Rosters       int                `json:"rosters"`
	RosterMembers int                `json:"roster_members"`
	RosterJoins   uint64             `json:"roster_joins"`
	RosterLeaves  uint64             `json:"roster_leaves"`
	Groups        int                `json:"queue_groups"` // group and shard pairs
	GroupLag      uint64             `json:"queue_lag"`
	GroupInflight int                `json:"queue_inflight"`
	GroupRate     float64            `json:"queue_delivered_per_s"`
	AckRate       float64            `json:"queue_acks_per_s"`
	RedeliverRate float64            `json:"queue_redeliveries_per_s"`
}

func streamSamples(prev, cur *broker.Stats, d time.Duration) []StreamSample {
	before := map[string]broker.StreamTraffic{}
	for _, t := range prev.Traffic {
		before[trafficName(t)] = t
	}
	out := make([]StreamSample, 0, len(cur.Traffic))
	for _, t := range cur.Traffic {
		p := before[trafficName(t)]
		if t.PublishEvents < p.PublishEvents { // a restarted broker
			p = broker.StreamTraffic{}
		}
		s := StreamSample{Stream: trafficName(t), Subscribers: t.Subscribers,
			PublishRate: perSecond(sub(t.PublishEvents, p.PublishEvents), d), PublishBytes: perSecond(sub(t.PublishBytes, p.PublishBytes), d),
			PublishErrors: sub(t.PublishErrors, p.PublishErrors),
			DeliveredRate: perSecond(sub(t.DeliveredEvents, p.DeliveredEvents), d), DropRate: perSecond(sub(t.Dropped, p.Dropped), d),
			AckRate: perSecond(sub(t.AckLatency.Count, p.AckLatency.Count), d),
		}
		s.published, s.acks = sub(t.PublishEvents, p.PublishEvents), sub(t.AckLatency.Count, p.AckLatency.Count)
		s.delivered, s.drops = sub(t.DeliveredEvents, p.DeliveredEvents), sub(t.Dropped, p.Dropped)
		s.ackBounds, s.ackCounts = histDelta(t.AckLatency, p.AckLatency)
		s.AckP50, s.AckP99 = latencyQuantile(s.ackBounds, s.ackCounts, 0.5), latencyQuantile(s.ackBounds, s.ackCounts, 0.99)
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b StreamSample) int {
		return cmp.Compare(b.PublishRate+b.DeliveredRate, a.PublishRate+a.DeliveredRate)
	})
	return out
}

func trafficName(t broker.StreamTraffic) string { return t.Tenant + "/" + t.Namespace + "/" + t.Stream }

// histDelta is cur minus prev as per-bucket (not cumulative) counts.
func histDelta(cur, prev broker.LatencyHistogram) ([]float64, []uint64) {
	counts := make([]uint64, len(cur.Counts))
	var below uint64
	for i, c := range cur.Counts {
		var p uint64
		if len(prev.Counts) == len(cur.Counts) {
			p = prev.Counts[i]
		}
		cum := sub(c, p)
		counts[i] = sub(cum, below)
		below = max(below, cum)
	}
	return cur.BoundsSeconds, counts
}

// latencyQuantile is the upper bound of the bucket holding the
// q-quantile (the last bound for observations past it), 0 without any.
func latencyQuantile(bounds []float64, counts []uint64, q float64) time.Duration {
	var total uint64
	for _, n := range counts {
		total += n
	}
	if total == 0 || len(bounds) == 0 {
		return 0
	}
	rank := max(uint64(math.Ceil(q*float64(total))), 1)
	var seen uint64
	for i, n := range counts {
		if seen += n; seen >= rank {
			return time.Duration(bounds[i] * float64(time.Second))
		}
	}
	return time.Duration(bounds[len(bounds)-1] * float64(time.Second))
}

func featureSample(prev, cur *broker.Stats, d time.Duration) FeatureSample {
	p, c := prev.Features, cur.Features
	f := FeatureSample{Caches: len(cur.Caches), CacheOpsRate: map[string]float64{},
		WatchRate: perSecond(sub(c.WatchEvents, p.WatchEvents), d), Rosters: len(cur.Rosters),
		RosterJoins: sub(c.RosterJoins, p.RosterJoins), RosterLeaves: sub(c.RosterLeaves, p.RosterLeaves),
		Groups: len(cur.Groups), GroupRate: perSecond(sub(c.GroupDelivered, p.GroupDelivered), d),
		AckRate: perSecond(sub(c.GroupAcks, p.GroupAcks), d), RedeliverRate: perSecond(sub(c.GroupRedelivered, p.GroupRedelivered), d)}
	for op, n := range c.CacheOps {
		if r := perSecond(sub(n, p.CacheOps[op]), d); r > 0 {
			f.CacheOpsRate[op] = r
		}
	}
	for _, cs := range cur.Caches {
		f.CacheEntries += cs.Entries
		f.CacheWatchers += cs.Watchers
	}
	for _, r := range cur.Rosters {
		f.RosterMembers += r.Members
	}
	for _, g := range cur.Groups {
		f.GroupLag += sub(g.Tail, g.Committed)
		f.GroupInflight += g.Inflight
	}
	return f
}

// printStreams writes the STREAM rows, busiest first, at most top.
func printStreams(w io.Writer, ss []StreamSample, top int) {
	if len(ss) == 0 {
		fmt.Fprintf(w, "%-9s none registered\n", "STREAMS")
		return
	}
	fmt.Fprintf(w, "%-32s %9s %11s %8s %8s %8s %10s %8s %5s\n", "STREAM", "PUB/s", "PUB B/s", "ACKS/s", "ACK p50", "ACK p99", "DELIVER/s", "DROPS/s", "SUBS")
	for _, s := range ss[:min(top, len(ss))] {
		fmt.Fprintf(w, "%-32s %9s %11s %8s %8s %8s %10s %8s %5d\n", clip(s.Stream, 32), fmtCount(s.PublishRate), fmtRate(s.PublishBytes),
			fmtCount(s.AckRate), fmtLE(s.AckP50), fmtLE(s.AckP99), fmtCount(s.DeliveredRate), fmtCount(s.DropRate), s.Subscribers)
	}
	more(w, len(ss)-top, "streams")
}

// fmtLE prints a quantile that is a bucket's upper bound.
func fmtLE(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return "≤" + fmtDur(d)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func printFeatures(w io.Writer, f *FeatureSample) {
	ops := make([]string, 0, len(f.CacheOpsRate))
	total := 0.0
	for op, r := range f.CacheOpsRate {
		total += r
		ops = append(ops, op+" "+fmtCount(r))
	}
	slices.Sort(ops)
	detail := ""
	if len(ops) > 0 {
		detail = " (" + strings.Join(ops, ", ") + ")"
	}
	fmt.Fprintf(w, "%-9s caches %d  entries %d  ops/s %s%s  watchers %d  watch events/s %s\n", "CACHE",
		f.Caches, f.CacheEntries, fmtCount(total), detail, f.CacheWatchers, fmtCount(f.WatchRate))
	fmt.Fprintf(w, "%-9s rosters %d  members %d  joins %d  leaves %d (in the interval)\n", "ROSTER",
		f.Rosters, f.RosterMembers, f.RosterJoins, f.RosterLeaves)
	fmt.Fprintf(w, "%-9s groups %d  lag %d  in flight %d  delivered/s %s  acks/s %s  redeliveries/s %s\n", "QUEUE",
		f.Groups, f.GroupLag, f.GroupInflight, fmtCount(f.GroupRate), fmtCount(f.AckRate), fmtCount(f.RedeliverRate))
}

// printRoles lists the broker's goroutines by role (pprof label).
func printRoles(w io.Writer, roles map[string]int) {
	if len(roles) == 0 {
		return
	}
	names := make([]string, 0, len(roles))
	for r := range roles {
		names = append(names, r)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, r := range names {
		parts[i] = fmt.Sprintf("%s ×%d", r, roles[r])
	}
	fmt.Fprintf(w, "%-9s %s  (goroutines by pprof label)\n", "ROLES", strings.Join(parts, "  "))
}

// StreamSummary is one stream over the run: events published and
// delivered, publish rates, and ack latency over every ack of the run.
type StreamSummary struct {
	Stream      string        `json:"stream"`
	Published   uint64        `json:"published_events"`
	PublishRate MeanMax       `json:"publish_events_per_s"`
	Acks        uint64        `json:"acks"`
	AckP50      time.Duration `json:"ack_p50_ns"`
	AckP99      time.Duration `json:"ack_p99_ns"`
	Delivered   uint64        `json:"delivered_events"`
	Drops       uint64        `json:"drops"`
	ackBounds   []float64
	ackCounts   []uint64
}

func (m *Summary) addStreams(s *Sample) {
	for _, st := range s.Streams {
		ss := m.streams[st.Stream]
		if ss == nil {
			ss = &StreamSummary{Stream: st.Stream}
			m.streams[st.Stream] = ss
		}
		ss.Published += st.published
		ss.Delivered += st.delivered
		ss.Drops += st.drops
		ss.Acks += st.acks
		ss.PublishRate.add(st.PublishRate)
		if len(ss.ackCounts) != len(st.ackCounts) {
			ss.ackBounds, ss.ackCounts = st.ackBounds, make([]uint64, len(st.ackCounts))
		}
		for i, n := range st.ackCounts {
			ss.ackCounts[i] += n
		}
		ss.AckP50, ss.AckP99 = latencyQuantile(ss.ackBounds, ss.ackCounts, 0.5), latencyQuantile(ss.ackBounds, ss.ackCounts, 0.99)
	}
}

func (m *Summary) finishStreams() {
	m.Streams = m.Streams[:0]
	for _, s := range m.streams {
		m.Streams = append(m.Streams, *s)
	}
	slices.SortFunc(m.Streams, func(a, b StreamSummary) int {
		return cmp.Or(cmp.Compare(b.Published+b.Delivered, a.Published+a.Delivered), strings.Compare(a.Stream, b.Stream))
	})
}

func printStreamSummary(w io.Writer, ss []StreamSummary, top int) {
	if len(ss) == 0 {
		return
	}
	fmt.Fprintf(w, "%-32s %10s %15s %8s %8s %8s %10s %8s\n", "STREAM", "PUBLISHED", "PUB/s mean/max", "ACKS", "ACK p50", "ACK p99", "DELIVERED", "DROPS")
	for _, s := range ss[:min(top, len(ss))] {
		fmt.Fprintf(w, "%-32s %10d %15s %8d %8s %8s %10d %8d\n", clip(s.Stream, 32), s.Published,
			fmtCount(s.PublishRate.Mean)+"/"+fmtCount(s.PublishRate.Max), s.Acks, fmtLE(s.AckP50), fmtLE(s.AckP99), s.Delivered, s.Drops)
	}
	more(w, len(ss)-top, "streams")
}
