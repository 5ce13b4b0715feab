package broker

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/felixmq/felix/wire"
)

// Per-stream and per-shard series, and their bound. Streams get series of
// their own in registration order, up to Config.MetricsStreamSeries; later
// ones share one set labelled "_other" (tenant, namespace and stream), so
// a tenant creating streams by the thousand cannot grow a scrape without
// bound. Per-shard series go to streams with series of their own, whole,
// while their shards fit in Config.MetricsShardSeries. A stream keeps its
// series for the life of the process.
//
// The counters are atomics on the stream (one add per publish batch, per
// delivered frame), turned into series at scrape time; the ack-latency
// histogram is a child of a HistogramVec picked once per stream, so the
// hot path never looks a label set up.

// otherLabel labels what the series bound folds together.
const otherLabel = "_other"

// latencyBuckets, in seconds: 10 µs to 10 s, for every latency histogram.
var latencyBuckets = []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// sizeBuckets, in bytes: 64 B to 16 MiB by fours.
var sizeBuckets = prometheus.ExponentialBuckets(64, 4, 10)

// streamMetrics are one stream's counters, or those every stream past the
// bound shares.
type streamMetrics struct {
	labels          []string // tenant, namespace, stream
	shards          bool     // per-shard series too
	publishEvents   atomic.Uint64
	publishBytes    atomic.Uint64 // payload bytes
	publishErrors   atomic.Uint64 // refused batches
	deliveredEvents atomic.Uint64
	deliveredBytes  atomic.Uint64 // payload bytes
	endedDrops      atomic.Uint64 // drops of subscriptions that have ended
	ackLatency      prometheus.Observer
}

func (m *streamMetrics) published(events, bytes int, err error) {
	if err != nil {
		m.publishErrors.Add(1)
		return
	}
	m.publishEvents.Add(uint64(events))
	m.publishBytes.Add(uint64(bytes))
}

// streamSeries hands out streamMetrics within the bound.
type streamSeries struct {
	maxStreams, maxShards int
	ackLatency            *prometheus.HistogramVec
	other                 *streamMetrics
	mu                    struct {
		sync.Mutex
		streams, shards int
	}
}

var streamLabels = []string{"tenant", "namespace", "stream"}

func newStreamSeries(cfg Config) *streamSeries {
	ss := &streamSeries{maxStreams: cfg.MetricsStreamSeries, maxShards: cfg.MetricsShardSeries,
		ackLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "felix_stream_publish_ack_latency_seconds",
			Help:    "Broker-side time from an acked publish's frame to its ack being queued, by stream.",
			Buckets: latencyBuckets,
		}, streamLabels)}
	other := []string{otherLabel, otherLabel, otherLabel}
	ss.other = &streamMetrics{labels: other, ackLatency: ss.ackLatency.WithLabelValues(other...)}
	return ss
}

// assign gives a stream being registered its series.
func (ss *streamSeries) assign(spec StreamSpec) *streamMetrics {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.mu.streams >= ss.maxStreams {
		return ss.other
	}
	ss.mu.streams++
	labels := []string{spec.Tenant, spec.Namespace, spec.Stream}
	m := &streamMetrics{labels: labels, ackLatency: ss.ackLatency.WithLabelValues(labels...)}
	if ss.mu.shards+spec.Shards <= ss.maxShards {
		ss.mu.shards += spec.Shards
		m.shards = true
	}
	return m
}

var (
	shardLabels = append(append([]string{}, streamLabels...), "shard")
	descStream  = struct {
		publishEvents, publishBytes, publishErrors, deliveredEvents, deliveredBytes, dropped, subscribers *prometheus.Desc
	}{
		publishEvents:   prometheus.NewDesc("felix_stream_publish_events_total", "Events accepted by publishes, by stream.", streamLabels, nil),
		publishBytes:    prometheus.NewDesc("felix_stream_publish_bytes_total", "Payload bytes accepted by publishes, by stream.", streamLabels, nil),
		publishErrors:   prometheus.NewDesc("felix_stream_publish_errors_total", "Publish batches refused at the shard (not admitted, not durable), by stream.", streamLabels, nil),
		deliveredEvents: prometheus.NewDesc("felix_stream_delivered_events_total", "Events written to subscribers (live, replayed or caught up from the log), by stream.", streamLabels, nil),
		deliveredBytes:  prometheus.NewDesc("felix_stream_delivered_bytes_total", "Payload bytes written to subscribers, by stream.", streamLabels, nil),
		dropped:         prometheus.NewDesc("felix_stream_dropped_events_total", "Events subscriber queues dropped (drop_new, drop_old), by stream.", streamLabels, nil),
		subscribers:     prometheus.NewDesc("felix_stream_subscribers", "Live subscriptions, by stream.", streamLabels, nil),
	}
	descShard = struct{ publishEvents, nextOffset, subscribers *prometheus.Desc }{
		publishEvents: prometheus.NewDesc("felix_shard_publish_events_total", "Events accepted by publishes, by shard.", shardLabels, nil),
		nextOffset:    prometheus.NewDesc("felix_shard_next_offset", "Offset the shard's next event gets (committed tail of a durable shard).", shardLabels, nil),
		subscribers:   prometheus.NewDesc("felix_shard_subscribers", "Live subscriptions, by shard.", shardLabels, nil),
	}
)

// streamCollector exports streamMetrics at scrape time.
type streamCollector struct{ b *Broker }

func (c streamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStream.publishEvents, descStream.publishBytes, descStream.publishErrors,
		descStream.deliveredEvents, descStream.deliveredBytes, descStream.dropped, descStream.subscribers,
		descShard.publishEvents, descShard.nextOffset, descShard.subscribers} {
		ch <- d
	}
}

func (c streamCollector) Collect(ch chan<- prometheus.Metric) {
	rows := c.b.streamTraffic(func(m *streamMetrics, sh *shard, next uint64, subs int) {
		labels := append(append([]string{}, m.labels...), strconv.Itoa(sh.id))
		ch <- prometheus.MustNewConstMetric(descShard.publishEvents, prometheus.CounterValue, float64(sh.eventsIn.Load()), labels...)
		ch <- prometheus.MustNewConstMetric(descShard.nextOffset, prometheus.GaugeValue, float64(next), labels...)
		ch <- prometheus.MustNewConstMetric(descShard.subscribers, prometheus.GaugeValue, float64(subs), labels...)
	})
	for _, r := range rows {
		m := r.m
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), m.labels...)
		}
		counter(descStream.publishEvents, m.publishEvents.Load())
		counter(descStream.publishBytes, m.publishBytes.Load())
		counter(descStream.publishErrors, m.publishErrors.Load())
		counter(descStream.deliveredEvents, m.deliveredEvents.Load())
		counter(descStream.deliveredBytes, m.deliveredBytes.Load())
		counter(descStream.dropped, r.drops)
		ch <- prometheus.MustNewConstMetric(descStream.subscribers, prometheus.GaugeValue, float64(r.subs), m.labels...)
	}
}

// trafficRow is one streamMetrics with what is read from the streams and
// subscriptions it counts.
type trafficRow struct {
	m     *streamMetrics
	drops uint64 // of live and ended subscriptions
	subs  int
}

// streamTraffic returns a row per streamMetrics (a stream, or "_other"), in
// registration order, and calls shard for every shard with series of its
// own.
func (b *Broker) streamTraffic(shard func(m *streamMetrics, sh *shard, next uint64, subs int)) []*trafficRow {
	var rows []*trafficRow
	of := map[*streamMetrics]*trafficRow{}
	row := func(m *streamMetrics) *trafficRow {
		r, ok := of[m]
		if !ok {
			r = &trafficRow{m: m, drops: m.endedDrops.Load()}
			of[m] = r
			rows = append(rows, r)
		}
		return r
	}
	for _, st := range b.streams.list() {
		r := row(st.m)
		for _, sh := range st.shards {
			next, _, subs := sh.stats()
			r.subs += subs
			if st.m.shards && shard != nil {
				shard(st.m, sh, next, subs)
			}
		}
	}
	for _, cn := range b.conns() {
		for _, s := range cn.subscriptions() {
			if s.sh != nil {
				row(s.sh.st.m).drops += s.queue.Stats().DroppedEvents
			}
		}
	}
	return rows
}

// StreamTraffic is one series of the per-stream metrics in
// /debug/felix/stats: a stream, or every stream past the series bound
// (tenant, namespace and stream "_other"). Counters are cumulative.
type StreamTraffic struct {
	Tenant          string `json:"tenant"`
	Namespace       string `json:"namespace"`
	Stream          string `json:"stream"`
	PublishEvents   uint64 `json:"publish_events"`
	PublishBytes    uint64 `json:"publish_bytes"`
	PublishErrors   uint64 `json:"publish_errors"`
	DeliveredEvents uint64 `json:"delivered_events"`
	DeliveredBytes  uint64 `json:"delivered_bytes"`
	Dropped         uint64 `json:"dropped"`
	Subscribers     int    `json:"subscribers"`
	// AckLatency is felix_stream_publish_ack_latency_seconds.
	AckLatency LatencyHistogram `json:"ack_latency"`
}

// LatencyHistogram is a cumulative histogram: Counts[i] observations at
// most BoundsSeconds[i], Count in all.
type LatencyHistogram struct {
	Count         uint64    `json:"count"`
	SumSeconds    float64   `json:"sum_s"`
	BoundsSeconds []float64 `json:"bounds_s"`
	Counts        []uint64  `json:"counts"`
}

func (r *trafficRow) stats() StreamTraffic {
	m := r.m
	t := StreamTraffic{Tenant: m.labels[0], Namespace: m.labels[1], Stream: m.labels[2],
		PublishEvents: m.publishEvents.Load(), PublishBytes: m.publishBytes.Load(), PublishErrors: m.publishErrors.Load(),
		DeliveredEvents: m.deliveredEvents.Load(), DeliveredBytes: m.deliveredBytes.Load(), Dropped: r.drops, Subscribers: r.subs}
	var pm dto.Metric
	if h, ok := m.ackLatency.(prometheus.Metric); ok && h.Write(&pm) == nil && pm.Histogram != nil {
		t.AckLatency = LatencyHistogram{Count: pm.Histogram.GetSampleCount(), SumSeconds: pm.Histogram.GetSampleSum()}
		for _, b := range pm.Histogram.Bucket {
			t.AckLatency.BoundsSeconds = append(t.AckLatency.BoundsSeconds, b.GetUpperBound())
			t.AckLatency.Counts = append(t.AckLatency.Counts, b.GetCumulativeCount())
		}
	}
	return t
}

// eventBatchPayload is the payload bytes of a queued buffer: every buffer
// a subscriber queue holds is a shared event batch frame with offsets
// (header, base offset, count, a length per event, the payloads).
func eventBatchPayload(buf []byte, events int) int {
	return len(buf) - wire.HeaderLen - 8 - 4 - 4*events
}
