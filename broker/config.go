package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/netaddr"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// ALPN is the TLS application protocol Felix uses. quic-go requires one on
// both ends; the published Felix set none, so a Rust client needs it added.
const ALPN = "felix"

// Config configures a Broker. The zero value of each field means the
// documented default.
type Config struct {
	// TLS is the server TLS config. Required; NextProtos is set to ALPN.
	TLS *tls.Config
	// Verifier checks auth frames. nil means DevVerifier, which New refuses
	// unless every address in ListenAddrs is loopback.
	Verifier Verifier
	// ListenAddrs are the addresses the broker will serve on, for the
	// loopback check of DevVerifier.
	ListenAddrs []string
	// MaxFrameBytes caps frames read from clients. 0 means 16 MiB.
	MaxFrameBytes uint32
	// Queue configures each subscriber queue: capacity in events and bytes,
	// and the policy of subscribers of ephemeral streams (and of durable
	// ones with DurableDrops). Its Budget is set by New from QueueBudget.
	Queue fanout.Config
	// QueueBudget bounds the memory all subscriber queues hold together,
	// each shared buffer counted once (fanout.Budget). 0 means 1 GiB;
	// negative means no bound.
	QueueBudget int64
	// DurableDrops makes subscribers of durable streams follow Queue.Policy
	// like those of ephemeral streams. By default a durable subscriber
	// that exceeds its queue leaves the live path, reads what it missed
	// from the log and rejoins the live tail (fanout.CatchUp): it never
	// loses an event.
	DurableDrops bool
	// SlowConsumerTimeout is how long a Block subscriber's full queue may
	// hold up publishers (in total, across publishes) before the
	// subscription is ended as a slow consumer. 0 means 10 s.
	SlowConsumerTimeout time.Duration
	// Batch configures delivery batching (max events, bytes, delay).
	Batch fanout.BatchConfig
	// RingEvents is how many recent events each shard keeps for replay.
	// 0 means 1024; negative means none.
	RingEvents int
	// AdmitTimeout bounds how long an acked publish may wait to be admitted
	// (only Block subscribers make it wait). 0 means 2 s.
	AdmitTimeout time.Duration
	// PlacementWait bounds how long a request for a shard that the
	// placement in force does not list yet (cluster mode) waits for a
	// placement that does before it is refused owner_unavailable: a new
	// stream reaches each broker before its placement may, and a broker
	// with the newer placement forwards to an owner that has yet to apply
	// it. 0 means 2 s; negative, no wait.
	PlacementWait time.Duration
	// IngressDrop selects an explicit, counted drop of fire-and-forget
	// publishes that cannot be admitted at once, instead of the default
	// backpressure through QUIC flow control.
	IngressDrop bool
	// MaxSubscriptionsPerConn caps live subscriptions per connection.
	// 0 means 4096.
	MaxSubscriptionsPerConn int
	// QUIC windows and stream limits; 0 means the defaults below.
	StreamReceiveWindow     uint64 // per stream, default 16 MiB
	ConnectionReceiveWindow uint64 // per connection, default 64 MiB
	MaxIncomingStreams      int64  // bidirectional and unidirectional, default 1024
	// MaxConnections refuses handshakes beyond this many live connections
	// (quic-go answers CONNECTION_REFUSED), after closing the oldest one
	// that authenticated nothing if there is one (admission.go). 0 means
	// 10,000.
	MaxConnections int
	// MaxConnectionsPerSource is MaxConnections per peer IP address. 0
	// means 1,024.
	MaxConnectionsPerSource int
	// AuthTimeout is how long a new stream may take to send its auth
	// frame before it is reset (streams opened and left silent would
	// otherwise hold a goroutine each), and how long a connection may go
	// without any stream authenticating before it is closed. 0 means 10 s.
	AuthTimeout time.Duration
	// PreAuthMaxFrameBytes caps a stream's first frame, read before it has
	// authenticated (budget.go). 0 means 64 KiB; never above MaxFrameBytes.
	PreAuthMaxFrameBytes uint32
	// PreAuthMaxStreams is how many streams of one connection may read
	// their auth frame at a time; later ones wait. 0 means 16.
	PreAuthMaxStreams int
	// FrameBufferBytes bounds the bytes all connections together hold for
	// frames not yet complete (each connection within its
	// ConnectionReceiveWindow); a stream whose frame would go beyond it
	// is ended. 0 means 1 GiB.
	FrameBufferBytes int64
	// DataDir holds the logs of durable streams, one directory per shard
	// (segment.ShardDirName). Empty: durable streams are refused.
	DataDir string
	// Storage is the segment configuration of every durable shard (segment
	// size, index spacing, retention, recovery options).
	Storage segment.Config
	// ResetMissing lists durable streams whose missing shard directories
	// New may recreate empty, at offset 0: an operator's decision that
	// their records are gone. Otherwise a stream the catalog lists whose
	// shard directory is missing refuses to open (segment.ErrMissing),
	// and so does New.
	ResetMissing []StreamKey
	// TenantDurableBytes bounds the disk one tenant's durable streams and
	// caches hold (preallocated segments included); a publish that needs
	// more is refused with ErrTenantQuota. 0: no bound.
	TenantDurableBytes int64
	// DataMinFreeBytes is the free space a preallocation must leave on the
	// data directory's file system, or it is refused (ErrDiskReserve). 0
	// means 256 MiB; negative, none.
	DataMinFreeBytes int64
	// FsyncInterval is the sync interval of "periodic" durable streams;
	// 0 means 250 ms.
	FsyncInterval time.Duration
	// RetentionInterval is how often retention runs over durable shards;
	// 0 means 60 s. Retention itself is off unless Storage sets a bound.
	RetentionInterval time.Duration
	// InitialMTU overrides the per-peer MTU policy (FELIX_INITIAL_MTU); 0
	// means the policy: 1452 without discovery for loopback peers, 1280
	// with path-MTU discovery otherwise.
	InitialMTU int
	// BlackHoleCooldown (FELIX_MTU_BLACK_HOLE_COOLDOWN_MS): after a client
	// closes a connection because its path stalled (wire.ClosePathStalled),
	// the broker answers that peer address at 1200 bytes with discovery off
	// for this long, matching the client's redial, since quic-go sizes
	// the server's packets from its own config, not the client's. 0 means
	// udp.DefaultBlackHoleCooldown; negative ignores stall closes.
	BlackHoleCooldown time.Duration
	// ConnStatsInterval logs every connection's QUIC statistics (RTT, MTU,
	// losses, congestion, GSO) at this interval (FELIX_CONN_STATS_MS); 0 = off.
	ConnStatsInterval time.Duration
	// NoConnTrace (FELIX_CONN_TRACE=false) attaches no quic-go tracer to
	// client connections unless ConnStatsInterval is set: with a tracer
	// quic-go builds an event for every packet sent and received (we keep
	// a handful), which is a large share of the broker's CPU (see
	// docs/BENCHMARKS.md, "The per-packet tracer"). Without it
	// /debug/felix/stats still has quic-go's ConnectionStats (RTT, bytes,
	// packets, losses) but no path MTU, congestion, ECN or PTO state.
	NoConnTrace bool
	// NodeID is this broker's cluster member id: in the placement given to
	// SetPlacement, the shards assigned to NodeID are this broker's.
	NodeID string
	// Forwarder sends publishes for shards of other brokers to their
	// owner (cluster mode); nil answers them not_owner instead.
	Forwarder Forwarder
	// NodeToken is a node credential shared by the cluster's brokers:
	// a stream that advertises wire.CapForwarded and authenticates with it
	// may publish to any tenant's streams (a broker forwarding for a client
	// it authorised). Empty: only NodeVerifier admits forwarded streams.
	NodeToken string
	// NodeVerifier accepts per-broker node credentials on forwarded
	// streams: a Felix token of the operator tenant with the cluster.node
	// permission. It is asked only for streams that advertise
	// wire.CapForwarded and whose token is not NodeToken; the stream ends
	// at the credential's Expiry. nil: NodeToken only, and without one a
	// forwarded stream is refused.
	NodeVerifier func(ctx context.Context, token string) (NodeCredential, error)
	// AdminAuth authenticates admin HTTP requests (AdminHandler) to every
	// endpoint but /live and /ready, before their body is read: nil error
	// lets one through, an *AdminAuthError says with which status it is
	// refused. nil serves everyone who reaches the listener, which
	// felix-broker allows on loopback only.
	AdminAuth func(r *http.Request) error
	// Catalog, when set, owns the streams and caches (a control plane the
	// broker follows): the admin API's POST /v1/streams and /v1/caches
	// create them through it and answer once this broker serves them, so
	// the catalog and the broker never disagree. nil: they are created in
	// this broker alone.
	Catalog Catalog
	// MetricsStreamSeries bounds the streams with series of their own in
	// the per-stream metric families (labels tenant, namespace, stream):
	// the first registered get them, later ones share the series labelled
	// "_other". 0 means 256; negative means none (every stream is
	// "_other").
	MetricsStreamSeries int
	// MetricsShardSeries bounds the series of the per-shard families
	// (label shard too): streams with series of their own get per-shard
	// series, whole, in registration order, while their shards fit. 0
	// means 1024; negative means none.
	MetricsShardSeries int
	// RaftDialer opens replication streams to other brokers (cluster mode
	// with replicated streams); nil: this broker holds no replica.
	RaftDialer RaftDialer
	// RaftTick is the period of the one ticker that drives every raft
	// group (0: 100 ms); RaftElectionTicks and RaftHeartbeatTicks are
	// raft's timeouts in ticks (0: 10 and 1, a 1 s election timeout).
	RaftTick                              time.Duration
	RaftElectionTicks, RaftHeartbeatTicks int
	// QuorumTimeout fails a quorum publish not committed in that long with
	// quorum_timeout (0: 5 s).
	QuorumTimeout time.Duration
	// RaftCatchUpBytesPerSecond bounds the entry bytes a leader sends to
	// replicas being added (learners), so that moving a replica leaves
	// client traffic its bandwidth; 0 is unbounded.
	RaftCatchUpBytesPerSecond int64
	// Groups configures consumer groups (config_group.go).
	Groups GroupConfig
	// RecordPublishers stores with each record of a durable stream the
	// principal that published it (the published format v6: a build that
	// predates it cannot open such a log). false stores none; in-memory
	// streams report the publishing connection's principal either way.
	RecordPublishers bool
	// Logger receives the broker's logs; nil discards them.
	Logger *slog.Logger
}

const (
	defaultRingEvents     = 1024
	defaultAdmitTimeout   = 2 * time.Second
	defaultPlacementWait  = 2 * time.Second
	defaultMaxSubs        = 4096
	defaultStreamWindow   = 16 << 20
	defaultConnWindow     = 64 << 20
	defaultMaxStreams     = 1024
	defaultMaxConnections = 10000
	defaultMaxPerSource   = 1024
	defaultAuthTimeout    = 10 * time.Second
	defaultQueueBudget    = 1 << 30
	defaultSlowConsumer   = 10 * time.Second
	defaultPreAuthFrame   = 64 << 10
	defaultPreAuthStreams = 16
	defaultFrameBuffers   = 1 << 30
	defaultMinFree        = 256 << 20
	defaultStreamSeries   = 256
	defaultShardSeries    = 1024
)

func (c Config) withDefaults() Config {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = wire.DefaultMaxFrameBytes
	}
	if c.RingEvents == 0 {
		c.RingEvents = defaultRingEvents
	}
	if c.AdmitTimeout == 0 {
		c.AdmitTimeout = defaultAdmitTimeout
	}
	if c.PlacementWait == 0 {
		c.PlacementWait = defaultPlacementWait
	}
	if c.MaxSubscriptionsPerConn == 0 {
		c.MaxSubscriptionsPerConn = defaultMaxSubs
	}
	if c.StreamReceiveWindow == 0 {
		c.StreamReceiveWindow = defaultStreamWindow
	}
	if c.ConnectionReceiveWindow == 0 {
		c.ConnectionReceiveWindow = defaultConnWindow
	}
	if c.MaxIncomingStreams == 0 {
		c.MaxIncomingStreams = defaultMaxStreams
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = defaultMaxConnections
	}
	if c.MaxConnectionsPerSource == 0 {
		c.MaxConnectionsPerSource = defaultMaxPerSource
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = defaultAuthTimeout
	}
	if c.QueueBudget == 0 {
		c.QueueBudget = defaultQueueBudget
	}
	if c.SlowConsumerTimeout == 0 {
		c.SlowConsumerTimeout = defaultSlowConsumer
	}
	if c.PreAuthMaxFrameBytes == 0 {
		c.PreAuthMaxFrameBytes = defaultPreAuthFrame
	}
	c.PreAuthMaxFrameBytes = min(c.PreAuthMaxFrameBytes, c.MaxFrameBytes)
	if c.PreAuthMaxStreams == 0 {
		c.PreAuthMaxStreams = defaultPreAuthStreams
	}
	if c.FrameBufferBytes == 0 {
		c.FrameBufferBytes = defaultFrameBuffers
	}
	if c.DataMinFreeBytes == 0 {
		c.DataMinFreeBytes = defaultMinFree
	}
	if c.MetricsStreamSeries == 0 {
		c.MetricsStreamSeries = defaultStreamSeries
	}
	if c.MetricsShardSeries == 0 {
		c.MetricsShardSeries = defaultShardSeries
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = time.Minute
	}
	if c.RaftTick == 0 {
		c.RaftTick = 100 * time.Millisecond
	}
	if c.RaftElectionTicks == 0 {
		c.RaftElectionTicks = 10
	}
	if c.RaftHeartbeatTicks == 0 {
		c.RaftHeartbeatTicks = 1
	}
	if c.QuorumTimeout == 0 {
		c.QuorumTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Groups = c.Groups.withDefaults()
	return c
}

func (c Config) validate() error {
	if c.TLS == nil {
		return fmt.Errorf("%w: TLS config is required", ErrInvalidConfig)
	}
	if c.Verifier == nil {
		if len(c.ListenAddrs) == 0 {
			return fmt.Errorf("%w: the dev verifier needs ListenAddrs to prove they are loopback", ErrInvalidConfig)
		}
		for _, a := range c.ListenAddrs {
			if !netaddr.Loopback(a) {
				return fmt.Errorf("%w: listener %s is not loopback and no auth is configured: "+
					"the dev verifier accepts any token, so it is allowed only on loopback", ErrInvalidConfig, a)
			}
		}
	}
	if c.Queue.Policy == fanout.CatchUp {
		return fmt.Errorf("%w: queue policy catch_up is for durable streams only (their default)", ErrInvalidConfig)
	}
	if c.AdmitTimeout < 0 || c.MaxSubscriptionsPerConn < 0 || c.MaxConnections < 0 || c.AuthTimeout < 0 || c.SlowConsumerTimeout < 0 ||
		c.PreAuthMaxStreams < 0 || c.FrameBufferBytes < 0 || c.MaxConnectionsPerSource < 0 || c.TenantDurableBytes < 0 {
		return fmt.Errorf("%w: negative limit", ErrInvalidConfig)
	}
	if c.RaftElectionTicks <= c.RaftHeartbeatTicks || c.RaftHeartbeatTicks < 1 {
		return fmt.Errorf("%w: raft election ticks (%d) must exceed heartbeat ticks (%d), which must be at least 1",
			ErrInvalidConfig, c.RaftElectionTicks, c.RaftHeartbeatTicks)
	}
	return c.Groups.validate()
}
