package broker

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/felixmq/felix/cpuprofile"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/udp"
)

// AdminHandler serves the admin endpoints: /live, /ready (503 while starting
// or draining), /metrics, /debug/pprof/, /debug/felix/stats, and the stream
// and cache API (POST and GET /v1/streams, /v1/caches, through
// Config.Catalog when there is one; GET and DELETE
// /v1/streams/{tenant}/{namespace}/{stream}), and a replicated shard's
// step-down (POST
// /v1/streams/{tenant}/{namespace}/{stream}/shards/{shard}/step-down). Every endpoint but /live and /ready is behind
// Config.AdminAuth.
func (b *Broker) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !b.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	guarded := http.NewServeMux()
	guarded.Handle("GET /metrics", promhttp.HandlerFor(b.metrics.reg, promhttp.HandlerOpts{}))
	guarded.HandleFunc("/debug/pprof/", pprof.Index)
	guarded.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	guarded.HandleFunc("/debug/pprof/profile", pprof.Profile)
	guarded.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	guarded.HandleFunc("/debug/pprof/trace", pprof.Trace)
	guarded.HandleFunc("GET /debug/felix/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, b.Stats())
	})
	guarded.HandleFunc("GET /v1/streams", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"streams": b.Streams()})
	})
	guarded.HandleFunc("POST /v1/streams", b.postStream)
	guarded.HandleFunc("GET /v1/streams/{tenant}/{namespace}/{stream}", b.getStream)
	guarded.HandleFunc("DELETE /v1/streams/{tenant}/{namespace}/{stream}", b.deleteStream)
	guarded.HandleFunc("GET /v1/caches", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"caches": b.Caches()})
	})
	guarded.HandleFunc("POST /v1/caches", b.postCache)
	guarded.HandleFunc("POST /v1/streams/{tenant}/{namespace}/{stream}/shards/{shard}/step-down", b.postStepDown)
	mux.Handle("/", b.adminAuth(guarded))
	return mux
}

// AdminAuthError is Config.AdminAuth's refusal: Status is 401 (no or an
// unknown credential) or 403 (a credential without the rights).
type AdminAuthError struct {
	Status int
	Reason string
}

func (e *AdminAuthError) Error() string { return "admin API: " + e.Reason }

// adminAuth lets a request through to next once Config.AdminAuth accepts
// it, before anything reads its body.
func (b *Broker) adminAuth(next http.Handler) http.Handler {
	if b.cfg.AdminAuth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := b.cfg.AdminAuth(r)
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		status := http.StatusUnauthorized
		var ae *AdminAuthError
		if errors.As(err, &ae) && ae.Status != 0 {
			status = ae.Status
		}
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="felix-broker"`)
		}
		if ok, n := b.authLog.allow(time.Now()); ok {
			b.log.Warn("admin request refused", "method", r.Method, "path", clip(r.URL.Path), "remote", r.RemoteAddr,
				"err", clip(err.Error()), "lines_suppressed", n)
		}
		writeJSON(w, status, map[string]string{"error": err.Error()})
	})
}

// postCache is POST /v1/caches: {tenant, namespace, cache, durable, fsync,
// max_entries, max_bytes}; 201 with the spec as registered (defaults
// filled in), 409 if it exists, 400 otherwise.
func (b *Broker) postCache(w http.ResponseWriter, r *http.Request) {
	var spec CacheSpec
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request body: " + err.Error()})
		return
	}
	err := b.createCache(r.Context(), spec)
	if err == nil {
		c, _ := b.caches.lookup(spec.CacheKey)
		writeJSON(w, http.StatusCreated, c.spec)
		return
	}
	writeJSON(w, createStatus(err, ErrCacheExists), map[string]string{"error": err.Error()})
}

func (b *Broker) postStream(w http.ResponseWriter, r *http.Request) {
	if b.cfg.NodeID != "" {
		// A stream only this broker knows is never placed, so it would be
		// refused as unplaced (owner_unavailable) everywhere.
		writeJSON(w, http.StatusConflict, map[string]string{"error": "cluster mode: create streams at the control plane, which places their shards"})
		return
	}
	var spec StreamSpec
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request body: " + err.Error()})
		return
	}
	if spec.Shards == 0 {
		spec.Shards = 1
	}
	if err := b.createStream(r.Context(), spec); err != nil {
		writeJSON(w, createStatus(err, ErrStreamExists), map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, spec)
}

// getStream is GET /v1/streams/{tenant}/{namespace}/{stream}: what this
// broker serves of the stream, its shards' offsets and subscribers, and its
// consumer groups with their lag.
func (b *Broker) getStream(w http.ResponseWriter, r *http.Request) {
	k := StreamKey{Tenant: r.PathValue("tenant"), Namespace: r.PathValue("namespace"), Stream: r.PathValue("stream")}
	st, err := b.streams.lookup(k)
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	info := StreamInfo{StreamStats: st.stats(), Groups: []GroupStats{}}
	for _, g := range b.groups.stats() {
		if g.Stream == k.String() {
			info.Groups = append(info.Groups, g)
		}
	}
	writeJSON(w, http.StatusOK, info)
}

// deleteStream is DELETE /v1/streams/{tenant}/{namespace}/{stream}: 204,
// or 404; with a catalog, 409 pointing at it (the stream is deleted there,
// and this broker follows).
func (b *Broker) deleteStream(w http.ResponseWriter, r *http.Request) {
	k := StreamKey{Tenant: r.PathValue("tenant"), Namespace: r.PathValue("namespace"), Stream: r.PathValue("stream")}
	if b.cfg.Catalog != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": ErrCatalogElsewhere.Error() +
			": delete the stream there (felix admin stream delete " + k.Stream + "); this broker follows"})
		return
	}
	if err := b.DeleteStream(k); err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// StreamInfo is GET /v1/streams/{tenant}/{namespace}/{stream}.
type StreamInfo struct {
	StreamStats
	Groups []GroupStats `json:"groups"`
}

// createStatus is the answer to a refused create: 409 for one that
// exists or that the catalog alone may create, 400 otherwise.
func createStatus(err, exists error) int {
	if errors.Is(err, exists) || errors.Is(err, ErrCatalogElsewhere) {
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Stats is the JSON snapshot behind /debug/felix/stats.
type Stats struct {
	Time          time.Time         `json:"time"`
	Ready         bool              `json:"ready"`
	Draining      bool              `json:"draining"`
	Buffers       fanout.PoolStats  `json:"buffers"`
	DroppedEvents uint64            `json:"dropped_events"`
	Peers         PeerStats         `json:"peers"`
	Streams       []StreamStats     `json:"streams"`
	Caches        []CacheStats      `json:"caches"`
	Connections   []ConnectionStats `json:"connections"`
	Rosters       []RosterStats     `json:"rosters"`
	// Groups are the consumer groups; "queue_groups" is the name readers
	// of this JSON know them by.
	Groups  []GroupStats `json:"queue_groups"`
	Cluster ClusterStats `json:"cluster"`
	// CPU is this process's CPU per OS thread and the machine's split
	// (user, system, softirq, iowait, idle ...), cumulative: rates come
	// from two scrapes (cpuprofile.Delta). Absent where cpuprofile cannot
	// read them (non-Linux); CPUUnavailable then says why.
	CPU            *cpuprofile.Snapshot `json:"cpu,omitempty"`
	CPUUnavailable string               `json:"cpu_unavailable,omitempty"`
	// Memory is the process's resident memory, anonymous and file-backed
	// (the durable logs' mapped pages); absent where it cannot be read.
	Memory *cpuprofile.ProcessMemory `json:"memory,omitempty"`
	// SubscriberQueues is what all subscriber queues hold, each shared
	// buffer once, against FELIX_SUBSCRIBER_QUEUE_TOTAL_BYTES.
	SubscriberQueues QueueBudgetStats `json:"subscriber_queues"`
	// Traffic is the per-stream metrics: publishes, deliveries, drops and
	// ack latency by stream (streams past the series bound as "_other").
	Traffic []StreamTraffic `json:"traffic"`
	// Features counts cache, roster and consumer-group operations.
	Features FeatureStats `json:"features"`
	// Goroutines counts goroutines by role (their pprof label).
	Goroutines map[string]int `json:"goroutines,omitempty"`
}

// FeatureStats are the cumulative operation counters of caches, keyed
// watch, rosters and consumer groups.
type FeatureStats struct {
	CacheOps         map[string]uint64 `json:"cache_ops"` // by op
	WatchEvents      uint64            `json:"watch_events"`
	RosterJoins      uint64            `json:"roster_joins"`
	RosterLeaves     uint64            `json:"roster_leaves"`
	GroupDelivered   uint64            `json:"queue_delivered"`
	GroupRedelivered uint64            `json:"queue_redelivered"`
	GroupAcks        uint64            `json:"queue_acks"`
	GroupNacks       uint64            `json:"queue_nacks"`
	GroupExpired     uint64            `json:"queue_expired"`
}

// QueueBudgetStats is the broker-wide subscriber queue budget.
type QueueBudgetStats struct {
	HeldBytes  int64 `json:"held_bytes"`
	LimitBytes int64 `json:"limit_bytes"` // 0: no bound
	Queues     int64 `json:"queues"`
}

// StreamStats describes one stream and its shards.
type StreamStats struct {
	StreamSpec
	Shards []ShardStats `json:"shard_stats"`
}

// ShardStats: next offset, the oldest offset a subscriber may start at,
// subscribers.
type ShardStats struct {
	Shard      int    `json:"shard"`
	NextOffset uint64 `json:"next_offset"`
	// FirstOffset is the oldest offset still readable: the log's first
	// record for a durable shard (whatever its memory ring holds), the
	// ring's oldest event for an ephemeral one.
	FirstOffset uint64 `json:"first_offset"`
	Subscribers int    `json:"subscribers"`
	// Commit is the group-commit account of a durable shard; absent for an
	// ephemeral one.
	Commit *CommitStats `json:"commit,omitempty"`
	// Replica is this broker's replica of a replicated shard; absent
	// otherwise.
	Replica *ReplicaStats `json:"replica,omitempty"`
}

// ConnectionStats is one client connection with quic-go's statistics.
type ConnectionStats struct {
	ID     uint64 `json:"id"`
	Remote string `json:"remote"`
	// Tenant and Principal (the token's subject) of the connection's
	// first authenticated stream; Role is peer, publisher, subscriber,
	// publisher+subscriber or client; Streams the streams it publishes
	// to or follows (at most four).
	Tenant        string        `json:"tenant,omitempty"`
	Principal     string        `json:"principal,omitempty"`
	Role          string        `json:"role,omitempty"`
	Streams       []string      `json:"streams,omitempty"`
	GSO           bool          `json:"gso"`
	MinRTT        time.Duration `json:"min_rtt_ns"`
	SmoothedRTT   time.Duration `json:"smoothed_rtt_ns"`
	CongestionWnd uint64        `json:"congestion_window"`
	BytesSent     uint64        `json:"bytes_sent"`
	BytesReceived uint64        `json:"bytes_received"`
	PacketsSent   uint64        `json:"packets_sent"`
	PacketsLost   uint64        `json:"packets_lost"`
	BytesLost     uint64        `json:"bytes_lost"`
	// Path is what the connection's trace recorded: MTU, losses,
	// congestion and ECN state.
	Path          udp.ConnSnapshot    `json:"path"`
	Subscriptions []SubscriptionStats `json:"subscriptions"`
}

// SubscriptionStats is one subscription's queue accounting.
type SubscriptionStats struct {
	ID     uint64 `json:"id"`
	Stream string `json:"stream,omitempty"`
	Shard  int    `json:"shard"`
	// Watch is "tenant/namespace/cache key" for a keyed watch.
	Watch string       `json:"watch,omitempty"`
	Queue fanout.Stats `json:"queue"`
	// Capacity and MaxBytes bound Queue.Depth (events) and
	// Queue.DepthBytes; a full queue drops, blocks or catches up per Policy.
	Capacity int    `json:"capacity"`
	MaxBytes int    `json:"max_bytes"`
	Policy   string `json:"policy"`
}

// Stats returns a snapshot of the broker's state.
func (b *Broker) Stats() Stats {
	s := Stats{Time: time.Now(), Ready: b.Ready(), Draining: b.draining.Load(), Buffers: b.pool.Stats(), DroppedEvents: b.droppedEvents(),
		Peers: b.peerStats(), Cluster: b.ClusterStats()}
	for _, st := range b.streams.list() {
		s.Streams = append(s.Streams, st.stats())
	}
	for _, c := range b.caches.list() {
		s.Caches = append(s.Caches, c.stats())
	}
	for _, c := range b.conns() {
		s.Connections = append(s.Connections, c.stats())
	}
	s.Rosters, s.Groups = b.rosters.stats(), b.groups.stats()
	s.CPU, s.CPUUnavailable = cpuStats()
	if m, err := cpuprofile.Memory(0); err == nil {
		s.Memory = &m
	}
	budget := b.cfg.Queue.Budget
	s.SubscriberQueues = QueueBudgetStats{HeldBytes: budget.Used(), LimitBytes: max(budget.Limit(), 0), Queues: budget.Queues()}
	for _, r := range b.streamTraffic(nil) {
		s.Traffic = append(s.Traffic, r.stats())
	}
	s.Features = b.metrics.features.stats(b)
	s.Goroutines = goroutineRoles()
	return s
}

func (st *stream) stats() StreamStats {
	ss := StreamStats{StreamSpec: st.spec}
	for _, sh := range st.shards {
		next, first, subs := sh.stats()
		shs := ShardStats{Shard: sh.id, NextOffset: next, FirstOffset: first, Subscribers: subs}
		if d := sh.durable(); d != nil {
			shs.Commit = commitStats(d.seq.Stats())
			shs.FirstOffset = d.log.First()
		}
		if r := sh.rep.Load(); r != nil {
			shs.Replica = r.stats()
		}
		ss.Shards = append(ss.Shards, shs)
	}
	return ss
}

func (c *conn) stats() ConnectionStats {
	qs := c.qc.ConnectionStats()
	cs := ConnectionStats{
		ID: c.id, Remote: c.qc.RemoteAddr().String(), GSO: c.qc.ConnectionState().GSO,
		MinRTT: qs.MinRTT, SmoothedRTT: qs.SmoothedRTT, CongestionWnd: uint64(qs.CongestionWindow),
		BytesSent: qs.BytesSent, BytesReceived: qs.BytesReceived, PacketsSent: qs.PacketsSent,
		PacketsLost: qs.PacketsLost, BytesLost: qs.BytesLost,
	}
	if ps := udp.ConnStatsFrom(c.qc.Context()); ps != nil {
		cs.Path = ps.Snapshot()
	}
	for _, sub := range c.subscriptions() {
		ss := SubscriptionStats{
			ID: sub.id, Watch: sub.watch, Queue: sub.queue.Stats(),
			Capacity: sub.queue.Capacity(), MaxBytes: sub.queue.MaxBytes(), Policy: sub.queue.Policy().String(),
		}
		if sub.sh != nil {
			ss.Stream, ss.Shard = sub.sh.st.spec.String(), sub.sh.id
		}
		cs.Subscriptions = append(cs.Subscriptions, ss)
	}
	c.identify(&cs)
	return cs
}
