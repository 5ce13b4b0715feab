package broker

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/buildinfo"
)

// metrics are the broker's Prometheus metrics on a private registry (no
// global state, so tests can run several brokers in one process).
type metrics struct {
	reg               *prometheus.Registry
	publishRequests   *prometheus.CounterVec
	publishEvents     prometheus.Counter
	bytesIn           prometheus.Counter
	ingressDropped    atomic.Uint64
	batchBytes        prometheus.Histogram
	deliveredEvents   atomic.Uint64
	bytesOut          atomic.Uint64 // payload bytes
	frameBytesOut     atomic.Uint64 // whole frames: headers, offsets, lengths, payloads
	connections       prometheus.Gauge
	connRefused       prometheus.Counter
	connRefusedSource prometheus.Counter
	// connUnauthenticated counts connections closed for authenticating
	// nothing: at the auth timeout, or evicted to admit another.
	connUnauthenticated *prometheus.CounterVec
	authTimeouts        prometheus.Counter
	subscribers         prometheus.Gauge
	violations          *prometheus.CounterVec
	ackLatency          prometheus.Histogram
	corruptions         prometheus.Counter
	catchUps            prometheus.Counter
	slowConsumers       prometheus.Counter
	endedDroppedEvent   atomic.Uint64 // drops of subscriptions that have ended
	cluster             clusterMetrics
	raft                raftMetrics
	streams             *streamSeries
	features            featureMetrics
}

func newMetrics(b *Broker) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		publishRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_publish_requests_total", Help: "Publish requests (one per batch) by result.",
		}, []string{"result"}),
		publishEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_publish_events_total", Help: "Events accepted by publishes.",
		}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_publish_bytes_total", Help: "Payload bytes accepted by publishes.",
		}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "felix_publish_batch_bytes", Help: "Payload bytes of each accepted publish batch.", Buckets: sizeBuckets,
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_connections", Help: "Open client connections.",
		}),
		connRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_connections_refused_total", Help: "Handshakes refused at FELIX_MAX_CONNECTIONS.",
		}),
		connRefusedSource: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_connections_refused_per_source_total", Help: "Handshakes refused at FELIX_MAX_CONNECTIONS_PER_SOURCE.",
		}),
		connUnauthenticated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_connections_unauthenticated_closed_total",
			Help: "Connections closed because none of their streams authenticated: at FELIX_AUTH_TIMEOUT_MS (timeout), or to admit another at a connection limit (evicted).",
		}, []string{"reason"}),
		authTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_auth_timeouts_total", Help: "Streams reset for sending no auth frame within FELIX_AUTH_TIMEOUT_MS.",
		}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_subscribers", Help: "Live subscriptions.",
		}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_protocol_violations_total", Help: "Frames refused as protocol violations, by stream kind.",
		}, []string{"stream"}),
		corruptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_storage_corruptions_total",
			Help: "Durable log records that failed their checks when read (replays, consumer groups) or at open; each is logged with its file and byte.",
		}),
		ackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "felix_publish_ack_latency_seconds",
			Help:    "Broker-side time from an acked publish's frame to its ack being queued.",
			Buckets: latencyBuckets,
		}),
		catchUps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_subscriber_catch_ups_total",
			Help: "Times a durable stream's subscriber outgrew its queue, left the live path and read what it missed from the log.",
		}),
		slowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_slow_consumers_total",
			Help: "Block-policy subscriptions ended for holding up publishers longer than FELIX_SUBSCRIBER_BLOCK_TIMEOUT_MS.",
		}),
	}
	budget := b.cfg.Queue.Budget
	m.reg.MustRegister(m.catchUps, m.slowConsumers,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_subscriber_queue_bytes",
			Help: "Memory the buffers in subscriber queues hold, each shared buffer counted once."},
			func() float64 { return float64(budget.Used()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_subscriber_queue_budget_bytes",
			Help: "FELIX_SUBSCRIBER_QUEUE_TOTAL_BYTES: the bound on felix_subscriber_queue_bytes (0: none)."},
			func() float64 { return float64(max(budget.Limit(), 0)) }))
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	m.streams = newStreamSeries(b.cfg)
	m.reg.MustRegister(m.streams.ackLatency, streamCollector{b}, m.batchBytes, buildinfo.Collector("felix-broker"),
		counter("felix_delivered_events_total", "Events written to subscriber event streams (live, replayed or caught up from the log).", &m.deliveredEvents),
		counter("felix_delivered_bytes_total", "Payload bytes written to subscriber event streams (as felix_publish_bytes_total counts them).", &m.bytesOut),
		counter("felix_delivered_frame_bytes_total", "Bytes written to subscriber event streams: frames with their headers, offsets and lengths, and gap notices.", &m.frameBytesOut))
	m.reg.MustRegister(m.features.collectors(b)...)
	m.reg.MustRegister(m.publishRequests, m.publishEvents, m.bytesIn, newDropCollector(b), storageCollector{b},
		m.connections, m.connRefused, m.connRefusedSource, m.connUnauthenticated, m.authTimeouts, m.subscribers, m.violations, m.ackLatency, m.corruptions,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_streams", Help: "Registered streams."},
			func() float64 { return float64(len(b.streams.list())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_frame_buffer_bytes",
			Help: "Bytes held for client frames not yet complete, all connections (bound: FELIX_FRAME_BUFFER_BUDGET_BYTES)."},
			func() float64 { return float64(b.frames.used.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "felix_frame_buffer_refusals_total",
			Help: "Streams ended because a frame needed more buffer than their connection's or the broker's budget."},
			func() float64 { return float64(b.frames.refused.Load()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.reg.MustRegister(m.cluster.collectors(b)...)
	m.raft = newRaftMetrics()
	m.reg.MustRegister(m.raft.collectors(b)...)
	return m
}

func (m *metrics) published(events, bytes int, acked bool, err error) {
	if err != nil {
		m.publishRequests.WithLabelValues("error").Inc()
		if !acked && errors.Is(err, ErrOverloaded) {
			m.ingressDropped.Add(uint64(events))
		}
		return
	}
	m.publishRequests.WithLabelValues("ok").Inc()
	m.publishEvents.Add(float64(events))
	m.bytesIn.Add(float64(bytes))
	m.batchBytes.Observe(float64(bytes))
}

func (m *metrics) protocolViolation(stream string) { m.violations.WithLabelValues(stream).Inc() }

// droppedEvents sums the drops of live and ended subscriptions.
func (b *Broker) droppedEvents() uint64 {
	n := b.metrics.endedDroppedEvent.Load()
	for _, c := range b.conns() {
		for _, s := range c.subscriptions() {
			n += s.queue.Stats().DroppedEvents
		}
	}
	return n
}

// dropDesc is every event Felix dropped, by reason: the subscriber queue
// policy that dropped it (drop_new drops the incoming event, drop_old evicts
// the oldest; block never drops) or ingress (FELIX_INGRESS_POLICY=drop).
var dropDesc = prometheus.NewDesc("felix_dropped_events_total",
	"Events dropped, by reason: subscriber_queue_full (drop_new), subscriber_queue_evicted (drop_old), ingress.",
	[]string{"reason"}, nil)

type dropCollector struct{ b *Broker }

func newDropCollector(b *Broker) prometheus.Collector { return dropCollector{b} }

func (d dropCollector) Describe(ch chan<- *prometheus.Desc) { ch <- dropDesc }

func (d dropCollector) Collect(ch chan<- prometheus.Metric) {
	full, evicted := 0.0, 0.0
	if d.b.cfg.Queue.Policy == fanout.DropOld {
		evicted = float64(d.b.droppedEvents())
	} else {
		full = float64(d.b.droppedEvents())
	}
	ch <- prometheus.MustNewConstMetric(dropDesc, prometheus.CounterValue, full, "subscriber_queue_full")
	ch <- prometheus.MustNewConstMetric(dropDesc, prometheus.CounterValue, evicted, "subscriber_queue_evicted")
	ch <- prometheus.MustNewConstMetric(dropDesc, prometheus.CounterValue, float64(d.b.metrics.ingressDropped.Load()), "ingress")
}
