package controlplane

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/felixmq/felix/internal/buildinfo"
)

// Metrics are the control plane's Prometheus metrics, on a registry of
// their own (no global state). Share one between the Servers of a process
// (the main and the bootstrap listener) so that a scrape of either sees
// both; Handler serves them.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	exchanges *prometheus.HistogramVec
	// Long-polls waiting: the changes feed (brokers following it) and the
	// placement (brokers and cluster clients).
	feedWaiters, placementWaiters atomic.Int64
	placerWatched                 atomic.Bool
}

// latencyBuckets, in seconds: 100 µs to 60 s (a long-poll's wait).
var latencyBuckets = []float64{1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// NewMetrics returns the metrics, with the Go runtime's and the process's.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_cp_requests_total",
			Help: "API requests, by route (the endpoint's pattern), method and status code."}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "felix_cp_request_duration_seconds",
			Help:    "Time to answer an API request, by route; a long-poll's includes its wait.",
			Buckets: latencyBuckets}, []string{"route"}),
		exchanges: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "felix_cp_token_exchange_duration_seconds",
			Help:    "Time to answer a token exchange (IdP key fetch and verification, minting), by result: ok or the refusal's code.",
			Buckets: latencyBuckets}, []string{"result"}),
	}
	gauge := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	m.reg.MustRegister(m.requests, m.latency, m.exchanges, buildinfo.Collector("felix-controlplane"),
		gauge("felix_cp_feed_watchers", "Long-polls of the changes feed waiting for a change (brokers following this control plane).", &m.feedWaiters),
		gauge("felix_cp_placement_watchers", "Long-polls of the placement waiting for a change.", &m.placementWaiters),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// watchPlacer exports the placer's state: the first placer of the
// Servers sharing m (one per process).
func (m *Metrics) watchPlacer(p *Placer) {
	if !m.placerWatched.CompareAndSwap(false, true) {
		return
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "felix_cp_placement_changes_total",
			Help: "New placements this control plane wrote or read (members joining, leaving or lapsing; streams created or deleted)."},
			func() float64 { return float64(p.changes.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_cp_placement_version", Help: "Version of the current placement."},
			func() float64 { return float64(p.Current().Version) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "felix_cp_members_live", Help: "Live brokers in the current placement."},
			func() float64 {
				n := 0
				for _, mb := range p.Current().Members {
					if mb.Live {
						n++
					}
				}
				return float64(n)
			}))
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets a long-poll's handler flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// observe counts a request to route that took since start.
func (m *Metrics) observe(route, method string, code int, start time.Time) {
	if code == 0 {
		code = http.StatusOK
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
}
