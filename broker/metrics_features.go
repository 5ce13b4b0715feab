package broker

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Cache operations, the values of felix_cache_ops_total's op label.
const (
	opGet        = "get"
	opPut        = "put"
	opDelete     = "delete"
	opCounterAdd = "counter_add"
	opCounterGet = "counter_get"
	opWatch      = "watch"
	opPutIf      = "put_if"
	opDeleteIf   = "delete_if"
)

var cacheOpNames = []string{opGet, opPut, opDelete, opCounterAdd, opCounterGet, opWatch, opPutIf, opDeleteIf}

// featureMetrics count the operations of caches and counters, keyed
// watch, rosters and consumer groups; their sizes (entries, members, lag,
// in flight) are read at scrape time.
type featureMetrics struct {
	cacheOps     *prometheus.CounterVec
	cacheErrors  *prometheus.CounterVec
	cacheLatency *prometheus.HistogramVec
	watchEvents  atomic.Uint64
	// Consumer groups: records handed to members (first deliveries and
	// redeliveries), acked, nacked, and taken back after their visibility
	// timeout.
	groupDelivered, groupRedelivered, groupAcks, groupNacks, groupExpired atomic.Uint64
}

func (fm *featureMetrics) cacheOp(op string, start time.Time) {
	fm.cacheOps.WithLabelValues(op).Inc()
	fm.cacheLatency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

func (fm *featureMetrics) stats(b *Broker) FeatureStats {
	fs := FeatureStats{CacheOps: map[string]uint64{}, WatchEvents: fm.watchEvents.Load(),
		RosterJoins: b.rosters.joins.Load(), RosterLeaves: b.rosters.leaves.Load(),
		GroupDelivered: fm.groupDelivered.Load(), GroupRedelivered: fm.groupRedelivered.Load(),
		GroupAcks: fm.groupAcks.Load(), GroupNacks: fm.groupNacks.Load(), GroupExpired: fm.groupExpired.Load()}
	for _, op := range cacheOpNames {
		var m dto.Metric
		if c, err := fm.cacheOps.GetMetricWithLabelValues(op); err == nil && c.Write(&m) == nil {
			fs.CacheOps[op] = uint64(m.GetCounter().GetValue())
		}
	}
	return fs
}

// groupTaken counts records a member took.
func (fm *featureMetrics) groupTaken(taken []takenRec) {
	re := 0
	for _, t := range taken {
		if t.redeliveries > 0 {
			re++
		}
	}
	fm.groupDelivered.Add(uint64(len(taken)))
	fm.groupRedelivered.Add(uint64(re))
}

func (fm *featureMetrics) collectors(b *Broker) []prometheus.Collector {
	fm.cacheOps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_cache_ops_total",
		Help: "Cache and counter requests, by op: get, put, delete, counter_add, counter_get, watch, put_if, delete_if."}, []string{"op"})
	fm.cacheErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_cache_errors_total",
		Help: "Cache and counter requests refused, by cache_error code."}, []string{"code"})
	fm.cacheLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "felix_cache_op_latency_seconds",
		Help:    "Time from a cache request to its reply being queued (a change waits for its sync in on_commit), by op.",
		Buckets: latencyBuckets}, []string{"op"})
	for _, op := range cacheOpNames {
		fm.cacheOps.WithLabelValues(op) // every op has a series from the start
		fm.cacheLatency.WithLabelValues(op)
	}
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{fm.cacheOps, fm.cacheErrors, fm.cacheLatency, featureCollector{b},
		counter("felix_watch_events_total", "Cache changes written to keyed watchers.", &fm.watchEvents),
		counter("felix_roster_joins_total", "Roster joins (a re-join replacing metadata counts).", &b.rosters.joins),
		counter("felix_roster_leaves_total", "Roster leaves, explicit or by a closing connection.", &b.rosters.leaves),
		counter("felix_queue_delivered_total", "Consumer-group records handed to members, redeliveries included.", &fm.groupDelivered),
		counter("felix_queue_redeliveries_total", "Consumer-group records handed out again (after a nack, a visibility timeout or a member leaving).", &fm.groupRedelivered),
		counter("felix_queue_acks_total", "Consumer-group records acked.", &fm.groupAcks),
		counter("felix_queue_nacks_total", "Consumer-group records nacked.", &fm.groupNacks),
		counter("felix_queue_visibility_expired_total", "Consumer-group records taken back from a member after their visibility timeout.", &fm.groupExpired),
	}
}

var groupLabels = append(append([]string{}, streamLabels...), "group")

var descFeature = struct {
	caches, cacheEntries, cacheBytes, cacheWatchers, rosters, rosterMembers, rosterWatchers,
	groupLag, groupInflight, groupRedo, groupDead *prometheus.Desc
}{
	caches:         prometheus.NewDesc("felix_caches", "Registered caches.", nil, nil),
	cacheEntries:   prometheus.NewDesc("felix_cache_entries", "Live entries in all caches (expired ones until they are read or evicted).", nil, nil),
	cacheBytes:     prometheus.NewDesc("felix_cache_bytes", "Bytes of keys and values in all caches.", nil, nil),
	cacheWatchers:  prometheus.NewDesc("felix_cache_watchers", "Keyed watches open.", nil, nil),
	rosters:        prometheus.NewDesc("felix_rosters", "Rosters in use.", nil, nil),
	rosterMembers:  prometheus.NewDesc("felix_roster_members", "Members of all rosters.", nil, nil),
	rosterWatchers: prometheus.NewDesc("felix_roster_watchers", "Roster watches open.", nil, nil),
	groupLag: prometheus.NewDesc("felix_queue_group_lag", "Records of the stream not yet acked by the group (committed tail minus the group's committed offset, over its shards).",
		groupLabels, nil),
	groupInflight: prometheus.NewDesc("felix_queue_group_inflight", "Records out to the group's members, not yet acked.", groupLabels, nil),
	groupRedo:     prometheus.NewDesc("felix_queue_group_redeliveries_pending", "Records waiting to be handed out again.", groupLabels, nil),
	groupDead:     prometheus.NewDesc("felix_queue_group_dead_letters", "Dead letters of the group (records that ran out of attempts, or were given up), until redriven or discarded.", groupLabels, nil),
}

// featureCollector reads the sizes at scrape time. Consumer groups have
// series of their own when their stream has (streamSeries), at most as
// many as streams may; the rest share group "_other".
type featureCollector struct{ b *Broker }

func (c featureCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFeature.caches, descFeature.cacheEntries, descFeature.cacheBytes, descFeature.cacheWatchers,
		descFeature.rosters, descFeature.rosterMembers, descFeature.rosterWatchers,
		descFeature.groupLag, descFeature.groupInflight, descFeature.groupRedo, descFeature.groupDead} {
		ch <- d
	}
}

func (c featureCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var entries, bytes, watchers float64
	caches := c.b.caches.list()
	for _, cc := range caches {
		s := cc.stats()
		entries, bytes, watchers = entries+float64(s.Entries), bytes+float64(s.Bytes), watchers+float64(s.Watchers)
	}
	gauge(descFeature.caches, float64(len(caches)))
	gauge(descFeature.cacheEntries, entries)
	gauge(descFeature.cacheBytes, bytes)
	gauge(descFeature.cacheWatchers, watchers)
	var members, rwatchers float64
	rs := c.b.rosters.stats()
	for _, r := range rs {
		members, rwatchers = members+float64(r.Members), rwatchers+float64(r.Watchers)
	}
	gauge(descFeature.rosters, float64(len(rs)))
	gauge(descFeature.rosterMembers, members)
	gauge(descFeature.rosterWatchers, rwatchers)
	c.collectGroups(gauge)
}

func (c featureCollector) collectGroups(gauge func(*prometheus.Desc, float64, ...string)) {
	type groupKey struct{ stream, group string }
	type sums struct {
		labels                    []string
		lag, inflight, redo, dead float64
	}
	var order []groupKey
	agg := map[groupKey]*sums{}
	own := map[string][]string{} // stream name -> its labels, for streams with series of their own
	for _, st := range c.b.streams.list() {
		if st.m != c.b.metrics.streams.other {
			own[st.spec.String()] = st.m.labels
		}
	}
	other := groupKey{otherLabel, otherLabel}
	bound := c.b.metrics.streams.maxStreams
	for _, g := range c.b.groups.stats() { // sorted by stream and group
		k := groupKey{g.Stream, g.Group}
		labels, ok := own[g.Stream]
		if _, seen := agg[k]; !seen && (!ok || len(agg) >= bound) {
			k, labels = other, []string{otherLabel, otherLabel, otherLabel}
		}
		s := agg[k]
		if s == nil {
			s = &sums{labels: append(append([]string{}, labels...), k.group)}
			agg[k] = s
			order = append(order, k)
		}
		s.lag += float64(g.Tail - min(g.Committed, g.Tail))
		s.inflight += float64(g.Inflight)
		s.redo += float64(g.Redo)
		s.dead += float64(g.DeadLetters)
	}
	for _, k := range order {
		s := agg[k]
		gauge(descFeature.groupLag, s.lag, s.labels...)
		gauge(descFeature.groupInflight, s.inflight, s.labels...)
		gauge(descFeature.groupRedo, s.redo, s.labels...)
		gauge(descFeature.groupDead, s.dead, s.labels...)
	}
}
