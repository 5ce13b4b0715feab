package broker

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/felixmq/felix/fanout"
)

// metrics are the broker's Prometheus metrics on a private registry (no
// global state, so tests can run several brokers in one process).
type metrics struct {
	reg               *prometheus.Registry
	publishRequests   *prometheus.CounterVec
	publishEvents     prometheus.Counter
	bytesIn           prometheus.Counter
	ingressDropped    prometheus.Counter
	deliveredEvents   prometheus.Counter
	bytesOut          prometheus.Counter
	connections       prometheus.Gauge
	subscribers       prometheus.Gauge
	violations        *prometheus.CounterVec
	ackLatency        prometheus.Histogram
	endedDroppedEvent atomic.Uint64 // drops of subscriptions that have ended
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
		ingressDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_ingress_dropped_total", Help: "Fire-and-forget events dropped at ingress (only with FELIX_INGRESS_POLICY=drop).",
		}),
		deliveredEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_delivered_events_total", Help: "Events written to subscriber event streams.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_delivered_bytes_total", Help: "Frame bytes written to subscriber event streams.",
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_connections", Help: "Open client connections.",
		}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_subscribers", Help: "Live subscriptions.",
		}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_protocol_violations_total", Help: "Frames refused as protocol violations, by stream kind.",
		}, []string{"stream"}),
		ackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "felix_publish_ack_latency_seconds",
			Help:    "Broker-side time from an acked publish's frame to its ack being queued.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 24),
		}),
	}
	m.reg.MustRegister(m.publishRequests, m.publishEvents, m.bytesIn, m.ingressDropped,
		m.deliveredEvents, m.bytesOut, m.connections, m.subscribers, m.violations, m.ackLatency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_streams", Help: "Registered streams."},
			func() float64 { return float64(len(b.streams.list())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "felix_subscriber_dropped_events_total", Help: "Events dropped by full subscriber queues (policy drop_new or drop_old).",
		}, func() float64 { return float64(b.droppedEvents()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (m *metrics) published(_ *stream, events int, payloads [][]byte, _ bool, err error) {
	if err != nil {
		m.publishRequests.WithLabelValues("error").Inc()
		return
	}
	m.publishRequests.WithLabelValues("ok").Inc()
	m.publishEvents.Add(float64(events))
	n := 0
	for _, p := range payloads {
		n += len(p)
	}
	m.bytesIn.Add(float64(n))
}

func (m *metrics) delivered(_ int, bufs []*fanout.Buffer) {
	ev, n := 0, 0
	for _, b := range bufs {
		ev += b.Events
		n += len(b.B)
	}
	m.deliveredEvents.Add(float64(ev))
	m.bytesOut.Add(float64(n))
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
