package main

import (
	"time"

	"github.com/felixmq/felix/internal/knob"
	"github.com/felixmq/felix/udp/netknobs"
)

// registry declares every FELIX_* knob the broker reads. Each is declared
// once here; `felix-broker env` and the README table are generated from it.
var registry = knob.New()

// Listeners and TLS.
var (
	knobQUICBind = registry.HostPort("FELIX_QUIC_BIND", "127.0.0.1:5000",
		"UDP address of the QUIC listener")
	knobAdminBind = registry.HostPort("FELIX_ADMIN_BIND", "127.0.0.1:8080",
		"TCP address of the admin HTTP server (/live, /ready, /metrics, /debug, /v1/streams)")
	knobAdminToken = registry.String("FELIX_ADMIN_TOKEN_FILE", "", "a file path, or empty",
		"bearer token every admin endpoint but /live and /ready requires (read again when the file changes); empty, with FELIX_ADMIN_TENANT empty too: the admin API is local-only (loopback, unauthenticated)", nil)
	knobAdminTenant = registry.String("FELIX_ADMIN_TENANT", "", "a tenant name, or empty",
		"tenant whose Felix tokens with admin on the whole tenant (tenant/*/*) the admin API also accepts as bearer tokens; empty: none", nil)
	knobAdminRemote = registry.Bool("FELIX_ADMIN_REMOTE", false,
		"allow FELIX_ADMIN_BIND beyond loopback; it also needs FELIX_ADMIN_TOKEN_FILE or FELIX_ADMIN_TENANT")
	knobTLSCert = registry.String("FELIX_TLS_CERT_FILE", "", "path to a PEM file, or empty",
		"server certificate (PEM); empty generates a self-signed one and logs its fingerprint", nil)
	knobTLSKey = registry.String("FELIX_TLS_KEY_FILE", "", "path to a PEM file, or empty",
		"private key of FELIX_TLS_CERT_FILE", nil)
	knobControlPlane = registry.String("FELIX_CONTROLPLANE_URL", "", "an http(s) URL, or empty",
		"control plane to follow (streams, caches, tenants) and whose tenant keys verify Felix tokens; empty: the embedded one (FELIX_EMBEDDED_CONTROLPLANE_BIND)", checkURL)
	knobControlPlaneToken = registry.String("FELIX_CONTROLPLANE_TOKEN_FILE", "", "a file path, or empty",
		"bearer token the broker reads the control plane's feed with (an operator admin's token or a node credential); read again when the file changes; empty: FELIX_NODE_TOKEN_FILE's", nil)
	knobDevDir = registry.String("FELIX_DEV_DIR", "/tmp/felix-dev", "a directory path",
		"private directory where the broker, once serving, writes for local clients cert.pem (self-signed certificate), broker.json (its addresses) and token and controlplane.url (embedded control plane); one broker at a time: a second one on it is refused", nil)
)

// Cluster mode (docs/cluster.md).
var (
	knobNodeID = registry.String("FELIX_NODE_ID", "", "a member id ([A-Za-z0-9._-], at most 64 bytes), or empty",
		"this broker's cluster member id; with FELIX_CONTROLPLANE_URL it registers and serves only the shards placed on it, forwarding the rest; empty: single-broker mode", checkNodeID)
	knobAdvertise = registry.String("FELIX_ADVERTISE_ADDR", "", "host:port, or empty",
		"QUIC address other brokers and clients reach this broker at (in placement and owner-naming acks); empty: FELIX_QUIC_BIND's bound address", checkHostPortOrEmpty)
	knobNodeToken = registry.String("FELIX_NODE_TOKEN_FILE", "", "a file path, or empty",
		"this broker's node credential (POST /v1/token/node): it registers with it and forwarded publishes authenticate with it; renewed half-way through its life, and read again when the file changes; empty: FELIX_CONTROLPLANE_TOKEN_FILE's token", nil)
	knobClusterCA = registry.String("FELIX_CLUSTER_CA_FILE", "", "path to a PEM file, or empty",
		"certificates trusted when forwarding to other brokers; empty: this broker's own certificate (brokers sharing one) and the system roots", nil)
	knobZone = registry.String("FELIX_ZONE", "", "a zone name (1-64 of [A-Za-z0-9._-], starting with a letter or digit), or empty",
		"zone this broker runs in (placement spreads a shard's replicas across zones); empty: none", checkZone)
)

// Embedded control plane (make run).
var knobEmbeddedCP = registry.String("FELIX_EMBEDDED_CONTROLPLANE_BIND", "127.0.0.1:0", "loopback host:port (port 0 picks a free port), or off",
	"with FELIX_CONTROLPLANE_URL empty and loopback binds: serve a control plane (memory store) in the broker, with tenant t1 and a token with full rights on it in FELIX_DEV_DIR; off: the dev verifier (any token, loopback only)", checkEmbeddedBind)

// Streams, caches, shards, ring.
var (
	knobStreams = registry.List("FELIX_STREAMS", "t1/default/demo:1", "comma list of tenant/namespace/stream[:shards[:fsync]], or empty",
		"streams created at start-up (more through POST /v1/streams), in the embedded control plane too when it runs; ignored in cluster mode (create them at the control plane); an fsync mode (on_commit|periodic|never) makes one durable", checkStreamList)
	knobCaches = registry.List("FELIX_CACHES", "t1/default/demo", "comma list of tenant/namespace/cache[:fsync], or empty",
		"caches created at start-up (more through POST /v1/caches), in the embedded control plane too when it runs; an fsync mode (on_commit|periodic|never) makes one durable", checkCacheList)
	knobRingEvents = registry.Int("FELIX_STREAM_RING_EVENTS", 1024, 0, 1<<24,
		"recent events each shard keeps in memory for subscribers starting in the past")
	knobMaxFrameBytes = registry.Bytes("FELIX_MAX_FRAME_BYTES", 16<<20, 1<<10, 1<<30,
		"largest wire frame accepted; checked from the header before any allocation")
)

// Durable storage.
var (
	knobDataDir = registry.String("FELIX_DATA_DIR", "", "a directory path, or empty",
		"where durable streams keep their logs (one directory per shard); empty refuses durable streams", nil)
	knobFsyncInterval = registry.Duration("FELIX_FSYNC_INTERVAL_MS", 250, 1, 3600000, time.Millisecond,
		"sync interval of durable streams in fsync mode periodic (the loss window on power failure)")
	knobSegmentBytes = registry.Bytes("FELIX_DURABLE_SEGMENT_BYTES", 256<<20, 64<<10, 64<<30,
		"size a durable shard's segment rolls at (preallocated a step at a time: FELIX_DURABLE_PREALLOC_BYTES)")
	knobInitialAlloc = registry.Bytes("FELIX_DURABLE_PREALLOC_BYTES", 1<<20, 4<<10, 64<<30,
		"what a new segment preallocates; the allocation doubles as records need it, up to FELIX_DURABLE_SEGMENT_BYTES")
	knobTenantDurable = registry.Bytes("FELIX_TENANT_DURABLE_BYTES", 0, 0, 1<<50,
		"disk one tenant's durable streams and caches may hold (preallocation included); a publish needing more is refused with tenant_quota; 0: no bound")
	knobMinFree = registry.Bytes("FELIX_DATA_MIN_FREE_BYTES", 256<<20, 0, 1<<50,
		"free space a preallocation must leave on FELIX_DATA_DIR's file system, or the publish needing it is refused; 0: none")
	knobIndexSpacing = registry.Bytes("FELIX_DURABLE_INDEX_SPACING_BYTES", 4096, 64, 64<<20,
		"bytes of log between two sparse index entries")
	knobRetentionBytes = registry.Bytes("FELIX_DURABLE_RETENTION_BYTES", 0, 0, 1<<50,
		"per shard: remove whole sealed segments from the head beyond this size; 0 keeps everything")
	knobRetentionMS = registry.Duration("FELIX_DURABLE_RETENTION_MS", 0, 0, 1<<40, time.Millisecond,
		"per shard: remove sealed segments whose newest record is older; 0 keeps everything")
	knobRetentionInterval = registry.Duration("FELIX_DURABLE_RETENTION_INTERVAL_MS", 60000, 100, 86400000, time.Millisecond,
		"how often retention runs (off the append path)")
	knobRepairTail = registry.Bool("FELIX_DURABLE_REPAIR_CHECKSUM_TAIL", false,
		"let recovery truncate a damaged (not merely torn) record at the very tail of the active segment")
	knobResetMissing = registry.String("FELIX_DURABLE_RESET_MISSING", "", "comma list of tenant/namespace/stream, or empty",
		"durable streams the data directory's catalog lists whose missing shard directories may be recreated empty at offset 0 (their records are gone); without it such a stream stops the broker at start-up (exit 2); remove it once the broker has started", checkStreamKeys)
	knobVerifyAll = registry.Bool("FELIX_DURABLE_VERIFY_ALL_ON_OPEN", false,
		"check every record of every segment at start-up, not only the active segment")
	knobMaxMapped = registry.Int("FELIX_DURABLE_MAX_MAPPED_SEGMENTS", 64, 0, 1<<20,
		"per shard: sealed segments kept mapped; the least recently read are unmapped and mapped again on demand (segments a reader holds stay mapped); 0: no bound")
	knobWriteMode = registry.Enum("FELIX_DURABLE_WRITE_MODE", "fd", []string{"fd", "mapped"},
		"appends through pwrite+fdatasync (measured faster) or copies into the mapping+msync")
)

// Consumer groups.
var (
	knobGroupMaxAttempts = registry.Int("FELIX_GROUP_MAX_ATTEMPTS", 0, 0, 1<<20,
		"deliveries of a record before it becomes a dead letter of its group, for groups that set no max_attempts of their own; 0 = no bound (redelivered until acked)")
	knobGroupMaxInFlight = registry.Int("FELIX_GROUP_MAX_IN_FLIGHT", 10000, 1, 1<<24,
		"records a consumer group may have claimed (or nacked with a delay) on one shard; a poll at the bound is answered empty")
	knobGroupVisibility = registry.Duration("FELIX_GROUP_VISIBILITY_TIMEOUT_MS", 30000, 1, 43200000, time.Millisecond,
		"how long a group_poll's claims stand when it asks for no visibility_ms")
	knobGroupMaxVisibility = registry.Duration("FELIX_GROUP_MAX_VISIBILITY_MS", 43200000, 1, 604800000, time.Millisecond,
		"cap on visibility_ms, extend_ms and a nack's delay_ms")
	knobGroupMaxWait = registry.Duration("FELIX_GROUP_MAX_WAIT_MS", 30000, 1, 600000, time.Millisecond,
		"cap on how long a group_poll may wait for records (wait_ms)")
	knobRecordPublishers = registry.Bool("FELIX_RECORD_PUBLISHERS", false,
		"store with each durable record the principal that published it (storage format v6: a build that predates it cannot open the log)")
)

// Publish ingress.
var (
	knobIngressPolicy = registry.Enum("FELIX_INGRESS_POLICY", "backpressure", []string{"backpressure", "drop"},
		"fire-and-forget publishes that cannot be admitted: wait (QUIC flow control) or drop and count")
	knobAdmitTimeout = registry.Duration("FELIX_PUBLISH_ADMIT_TIMEOUT_MS", 2000, 1, 600000, time.Millisecond,
		"longest an acked publish waits to be admitted before it gets an error ack")
)

// Replication (replicated streams, cluster mode).
var (
	knobRaftTick = registry.Duration("FELIX_RAFT_TICK_MS", 100, 10, 10000, time.Millisecond,
		"period of the one ticker that drives every raft group on the broker")
	knobRaftElectionTicks = registry.Int("FELIX_RAFT_ELECTION_TICKS", 10, 2, 1000,
		"ticks a follower waits without hearing its leader before it stands for election (randomised up to twice that)")
	knobRaftHeartbeatTicks = registry.Int("FELIX_RAFT_HEARTBEAT_TICKS", 1, 1, 100,
		"ticks between a leader's heartbeats; below FELIX_RAFT_ELECTION_TICKS")
	knobQuorumTimeout = registry.Duration("FELIX_PUBLISH_QUORUM_TIMEOUT_MS", 5000, 10, 600000, time.Millisecond,
		"longest a quorum publish waits to be committed before it gets quorum_timeout (outcome unknown)")
	knobRaftCatchUp = registry.Bytes("FELIX_RAFT_CATCHUP_BYTES_PER_SEC", 32<<20, 0, 1<<40,
		"entry bytes per second a leader sends to a replica being added (moves, replacements); 0 is unbounded")
)

// Subscriber delivery.
var (
	knobQueue = registry.Int("FELIX_SUBSCRIBER_QUEUE", 65536, 1, 1<<22,
		"events each subscriber may have queued before it is full (with FELIX_SUBSCRIBER_QUEUE_BYTES, whichever fills first)")
	knobQueueBytes = registry.Bytes("FELIX_SUBSCRIBER_QUEUE_BYTES", 64<<20, 4<<10, 1<<40,
		"bytes each subscriber may have queued before it is full (frame bytes; a batch shared by several subscribers counts in each)")
	knobQueueTotal = registry.Bytes("FELIX_SUBSCRIBER_QUEUE_TOTAL_BYTES", 1<<30, 0, 1<<50,
		"memory all subscriber queues may hold together, each shared batch counted once; over it, subscribers holding more than their share are full; 0 = no bound")
	knobQueuePolicy = registry.Enum("FELIX_SUBSCRIBER_QUEUE_POLICY", "drop_new", []string{"drop_new", "drop_old", "block"},
		"full queue of an ephemeral stream's subscriber: drop the incoming event, evict the oldest, or make the publisher wait (lossless)")
	knobDurableCatchUp = registry.Bool("FELIX_DURABLE_SUBSCRIBER_CATCH_UP", true,
		"a durable stream's subscriber whose queue is full reads what it missed from the log and rejoins the live tail (never drops); false: FELIX_SUBSCRIBER_QUEUE_POLICY applies")
	knobBlockTimeout = registry.Duration("FELIX_SUBSCRIBER_BLOCK_TIMEOUT_MS", 10000, 1, 3600000, time.Millisecond,
		"under the block policy, how long a subscriber's full queue may hold publishers up before it is cut as a slow consumer")
	knobBatchEvents = registry.Int("FELIX_EVENT_BATCH_MAX_EVENTS", 64, 1, 1<<16,
		"events per delivery write; 1 with MAX_DELAY_US=0 is the latency profile")
	knobBatchBytes = registry.Bytes("FELIX_EVENT_BATCH_MAX_BYTES", 64<<10, 1, 16<<20,
		"bytes per delivery write")
	knobBatchDelay = registry.Duration("FELIX_EVENT_BATCH_MAX_DELAY_US", 250, 0, 1000000, time.Microsecond,
		"longest a delivery waits for more events, measured from the first buffered event")
	knobMaxSubs = registry.Int("FELIX_MAX_SUBSCRIPTIONS_PER_CONN", 4096, 1, 1<<20,
		"live subscriptions one connection may hold")
	knobMaxConns = registry.Int("FELIX_MAX_CONNECTIONS", 10000, 1, 1<<20,
		"live client connections; a further handshake closes the oldest connection that has authenticated nothing, or is refused (CONNECTION_REFUSED) if there is none")
	knobMaxConnsSource = registry.Int("FELIX_MAX_CONNECTIONS_PER_SOURCE", 1024, 1, 1<<20,
		"live client connections from one IP address, with the same eviction of unauthenticated ones as FELIX_MAX_CONNECTIONS")
	knobMaxStreams = registry.Int("FELIX_MAX_STREAMS_PER_CONN", 1024, 1, 1<<16,
		"streams a client may have open on one connection, each direction (QUIC MAX_STREAMS)")
	knobConnTrace = registry.Bool("FELIX_CONN_TRACE", true,
		"record each connection's path MTU, congestion, ECN and PTO state from quic-go's per-packet trace events (in /debug/felix/stats and felixtrace); costs CPU per packet, see docs/BENCHMARKS.md; FELIX_CONN_STATS_MS > 0 turns it on")
	knobAuthTimeout = registry.Duration("FELIX_AUTH_TIMEOUT_MS", 10000, 100, 600000, time.Millisecond,
		"a stream that sends no auth frame within this long is reset, and a connection none of whose streams authenticated within this long is closed")
	knobPreAuthFrame = registry.Bytes("FELIX_PREAUTH_MAX_FRAME_BYTES", 64<<10, 1<<10, 16<<20,
		"largest frame a stream may send before it has authenticated (its auth frame); at most FELIX_MAX_FRAME_BYTES")
	knobPreAuthStreams = registry.Int("FELIX_PREAUTH_MAX_STREAMS_PER_CONN", 16, 1, 1<<16,
		"streams of one connection read at a time before they authenticate; the next wait, unread; with the frame limit this is the connection's receive window until a stream authenticates")
	knobFrameBudget = registry.Bytes("FELIX_FRAME_BUFFER_BUDGET_BYTES", 1<<30, 1<<20, 1<<40,
		"bytes all connections together may hold for frames not yet complete (each connection also within FELIX_QUIC_CONN_RECV_WINDOW); a stream whose frame would exceed either is ended")
)

// Packet path.
var (
	knobUDPGRO = registry.Bool("FELIX_UDP_GRO", true,
		"receive with UDP GRO (coalesced datagrams split for quic-go); false reads one packet per datagram")
	knobUDPGSO = registry.Bool("FELIX_UDP_GSO", true,
		"send with UDP GSO; false makes quic-go send one packet per sendmsg")
	knobSocketBuffer = registry.Bytes("FELIX_SOCKET_BUFFER_BYTES", 8<<20, 64<<10, 1<<30,
		"UDP socket receive and send buffers (forced when root; one warning if the kernel clamps)")
	knobIOThreads = registry.Int("FELIX_IO_RUNTIME_THREADS", 0, 0, 64,
		"dedicated locked I/O threads for socket reads; 0 reads inline on quic-go's goroutine")
	knobIOPinCPUs = registry.String("FELIX_IO_PIN_CPUS", "", "comma list of CPU numbers, or empty",
		"CPUs the I/O threads are pinned to (round robin); empty: no affinity", checkCPUList)
	// FELIX_INITIAL_MTU, FELIX_CONN_STATS_MS, FELIX_MTU_BLACK_HOLE_COOLDOWN_MS:
	// declared with the client tools, which read them too.
	netKnobs     = netknobs.Declare(registry)
	knobPlainUDP = registry.Bool("FELIX_UDP_PLAIN", false,
		"serve on a stock *net.UDPConn instead of the batched udp conn (for comparison)")
)

// QUIC.
var (
	knobStreamWindow = registry.Bytes("FELIX_QUIC_STREAM_RECV_WINDOW", 16<<20, 64<<10, 1<<30,
		"QUIC receive window per stream")
	knobConnWindow = registry.Bytes("FELIX_QUIC_CONN_RECV_WINDOW", 64<<20, 64<<10, 4<<30,
		"QUIC receive window per connection")
)

// Metrics.
var (
	knobMetricsStreams = registry.Int("FELIX_METRICS_STREAM_SERIES", 256, 0, 65536,
		"streams with series of their own in the per-stream metrics (felix_stream_*), in registration order; later ones share stream=\"_other\"; 0: none")
	knobMetricsShards = registry.Int("FELIX_METRICS_SHARD_SERIES", 1024, 0, 1<<20,
		"shard series in the per-shard metrics (felix_shard_*), given whole to streams with series of their own while they fit; 0: none")
)

// Process.
var (
	knobShutdownDrain = registry.Duration("FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS", 25000, 0, 600000, time.Millisecond,
		"budget for draining open work on SIGTERM/SIGINT before connections are closed")
	knobLogLevel = registry.Enum("FELIX_LOG_LEVEL", "info", []string{"debug", "info", "warn", "error"},
		"minimum level of log lines")
	knobLogFormat = registry.Enum("FELIX_LOG_FORMAT", "text", []string{"text", "json"},
		"log line format on stderr")
	knobAllowUnknown = registry.Bool("FELIX_ALLOW_UNKNOWN_KNOBS", false,
		"start although the environment sets FELIX_* variables that are not knobs (each is then a warning); without it they stop the start (exit 2), naming the closest knob")
)
