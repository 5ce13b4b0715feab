package broker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/wire"
)

// StreamKey names a stream.
type StreamKey struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
}

func (k StreamKey) String() string { return k.Tenant + "/" + k.Namespace + "/" + k.Stream }

// StreamSpec is what registering a stream takes.
type StreamSpec struct {
	StreamKey
	Shards int `json:"shards"`
	// Durable streams keep their records in a segment log under
	// Config.DataDir; ephemeral ones only in the in-memory ring.
	Durable bool `json:"durable,omitempty"`
	// Fsync is the durable stream's commit mode: "on_commit" (an ack means
	// the record survives kill -9 and power loss), "periodic" (default; one
	// FsyncInterval of loss window) or "never" (the OS decides).
	Fsync string `json:"fsync,omitempty"`
	// Routing maps a publish's key to a shard: "modulo" (default, also
	// "") or "jump_hash" (wire.RouteKey), fixed when the stream is
	// created, as in the published Felix, so a key lands on the same
	// shard there and here.
	Routing string `json:"routing,omitempty"`
	// Replicas is a durable stream's replication factor: 1 (or 0, the
	// default) keeps each shard on its owner's disk; 3 or 5 make each shard
	// a raft group over that many brokers (docs/cluster.md, "Replication").
	Replicas int `json:"replicas,omitempty"`
	// Ack is a replicated stream's ack mode: "quorum" (default: a majority
	// holds the records) or "leader" (the leader does; a failover may lose
	// what no follower had).
	Ack string `json:"ack,omitempty"`
}

// replicated reports whether the stream's shards are raft groups.
func (s StreamSpec) replicated() bool { return s.Replicas > 1 }

// MaxShards bounds the shard count of one stream.
const MaxShards = 1024

func (s StreamSpec) validate() error {
	for _, f := range []struct{ name, v string }{{"tenant", s.Tenant}, {"namespace", s.Namespace}, {"stream", s.Stream}} {
		if f.v == "" {
			return fmt.Errorf("%w: %s is empty", ErrInvalidStream, f.name)
		}
		if len(f.v) > 255 || !utf8.ValidString(f.v) || strings.ContainsAny(f.v, "/\x00") {
			return fmt.Errorf("%w: %s %q must be valid UTF-8, at most 255 bytes, without '/'", ErrInvalidStream, f.name, f.v)
		}
	}
	if s.Shards < 1 || s.Shards > MaxShards {
		return fmt.Errorf("%w: shards %d not in [1, %d]", ErrInvalidStream, s.Shards, MaxShards)
	}
	if !s.Durable && s.Fsync != "" {
		return fmt.Errorf("%w: fsync %q applies to durable streams only", ErrInvalidStream, s.Fsync)
	}
	if s.Durable {
		if _, err := commit.ParseMode(s.Fsync); err != nil {
			return fmt.Errorf("%w: fsync %q: want on_commit, periodic or never", ErrInvalidStream, s.Fsync)
		}
	}
	switch {
	case s.Replicas != 0 && s.Replicas != 1 && s.Replicas != 3 && s.Replicas != 5:
		return fmt.Errorf("%w: replicas %d: want 1, 3 or 5", ErrInvalidStream, s.Replicas)
	case s.Replicas > 1 && !s.Durable:
		return fmt.Errorf("%w: replicas %d: only durable streams are replicated", ErrInvalidStream, s.Replicas)
	case s.Ack != "" && s.Ack != "leader" && s.Ack != "quorum":
		return fmt.Errorf("%w: ack %q: want leader or quorum", ErrInvalidStream, s.Ack)
	case s.Ack != "" && s.Replicas <= 1:
		return fmt.Errorf("%w: ack %q applies to replicated streams (replicas 3 or 5)", ErrInvalidStream, s.Ack)
	}
	if _, ok := wire.ParseRouting(s.Routing); !ok {
		return fmt.Errorf("%w: routing %q: want modulo or jump_hash", ErrInvalidStream, s.Routing)
	}
	return nil
}

// stream is a registered stream and its shards.
type stream struct {
	spec    StreamSpec
	routing wire.Routing
	created time.Time
	shards  []*shard
	// deleted is set when DeleteStream unregisters it, for the publishers
	// that cached it.
	deleted atomic.Bool
	m       *streamMetrics // its series, or those it shares past the bound
}

// shardFor picks the shard of a publish: keyed publishes hash the key, so
// every record of one key keeps its order; unkeyed ones use the caller's
// sticky hint (one per publishing QUIC stream), which keeps a publisher's
// order without a global counter.
func (s *stream) shardFor(key []byte, hint uint32) *shard {
	n := uint32(len(s.shards))
	if key != nil {
		return s.shards[wire.RouteKey(key, n, s.routing)]
	}
	return s.shards[hint%n]
}

// pick is shardFor with an explicit shard (>= 0) taking precedence.
func (s *stream) pick(key []byte, shard int, hint uint32) (*shard, error) {
	if shard < 0 {
		return s.shardFor(key, hint), nil
	}
	if shard >= len(s.shards) {
		return nil, fmt.Errorf("%w: shard %d not in [0, %d) for %s", ErrInvalidRequest, shard, len(s.shards), s.spec.StreamKey)
	}
	return s.shards[shard], nil
}

// registry holds the streams of this broker.
type registry struct {
	newShard func(st *stream, id int) (*shard, error)
	series   *streamSeries
	mu       struct {
		sync.RWMutex
		streams map[StreamKey]*stream
	}
}

func newRegistry(newShard func(st *stream, id int) (*shard, error), series *streamSeries) *registry {
	r := &registry{newShard: newShard, series: series}
	r.mu.streams = map[StreamKey]*stream{}
	return r
}

// create opens the shards of a new stream and then serves it, once record
// (nil: nothing to do) succeeded: a durable stream is in the data
// directory's catalog before a publish to it can be acked, so a crash at
// any point leaves no acked record in a stream a restart would not
// reopen. The caller serialises creations (Broker.catalogMu).
func (r *registry) create(spec StreamSpec, record func(*stream) error) (*stream, error) {
	if spec.Durable && spec.Fsync == "" {
		spec.Fsync = commit.Periodic.String()
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if _, err := r.lookup(spec.StreamKey); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrStreamExists, spec.StreamKey)
	}
	routing, _ := wire.ParseRouting(spec.Routing) // validated
	st := &stream{spec: spec, routing: routing, created: time.Now(), m: r.series.assign(spec)}
	closeAll := func() {
		for _, opened := range st.shards {
			opened.close()
		}
	}
	for i := range spec.Shards {
		sh, err := r.newShard(st, i)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s shard %d: %w", spec.StreamKey, i, err)
		}
		st.shards = append(st.shards, sh)
	}
	if record != nil {
		if err := record(st); err != nil {
			closeAll()
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.streams[spec.StreamKey] = st
	return st, nil
}

func (r *registry) lookup(k StreamKey) (*stream, error) {
	r.mu.RLock()
	st := r.mu.streams[k]
	r.mu.RUnlock()
	if st == nil {
		return nil, notFound(k)
	}
	return st, nil
}

func (r *registry) list() []*stream {
	r.mu.RLock()
	out := make([]*stream, 0, len(r.mu.streams))
	for _, st := range r.mu.streams {
		out = append(out, st)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *stream) int { return strings.Compare(a.spec.String(), b.spec.String()) })
	return out
}
