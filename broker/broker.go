package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/udp"
)

// Broker serves Felix over QUIC.
type Broker struct {
	cfg      Config
	log      *slog.Logger
	verifier Verifier
	pool     *fanout.Pool
	streams  *registry
	caches   *cacheRegistry
	metrics  *metrics
	rosters  rosterSet
	groups   groupSet
	raft     *raftHost // replicated shards' groups and transport (raft.go)

	placement  atomic.Pointer[placementView] // nil: single-broker mode (cluster.go)
	load       loadMeter                     // load.go
	nextConnID atomic.Uint64
	nextSubID  atomic.Uint64
	ready      atomic.Bool
	draining   atomic.Bool
	inflight   atomic.Int64  // publishes between their draining check and their return
	listening  chan struct{} // closed when the first listener accepts
	listenOnce sync.Once

	mu struct {
		sync.Mutex
		conns     map[*conn]struct{} // live connections (handshakes in progress are not counted)
		perSource map[netip.Addr]int // live connections per peer address
		listeners []*quic.Listener
		closed    bool
	}
	catalogMu     sync.Mutex // serialises stream creation with catalog writes
	stopRetention chan struct{}
	stalls        *stallMemory
	authLog       *logLimit   // auth refusals and forwarded stream opens
	storageLog    *logLimit   // storage corruption found by readers
	frames        *byteBudget // bytes held for incomplete frames, all connections
	space         *diskSpace  // durable bytes per tenant, free space of DataDir
	reopening     bool        // New is reopening the catalog's streams (set before any goroutine)
	retentionDone chan struct{}
	closeOnce     sync.Once
	closeErr      error

	serving sync.WaitGroup // accept loops
	work    sync.WaitGroup // connection handlers
}

// New builds a broker; it serves nothing until Serve.
func New(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, err := fanout.NewBatcher(cfg.Batch); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if _, err := fanout.NewQueue(cfg.Queue); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	cfg.Queue.Budget = fanout.NewBudget(cfg.QueueBudget)
	b := &Broker{
		cfg:        cfg,
		log:        cfg.Logger,
		verifier:   cfg.Verifier,
		pool:       &fanout.Pool{},
		listening:  make(chan struct{}),
		stalls:     newStallMemory(cfg.BlackHoleCooldown),
		authLog:    newLogLimit(100*time.Millisecond, 20),
		storageLog: newLogLimit(100*time.Millisecond, 20),
		frames:     newByteBudget(cfg.FrameBufferBytes, nil),
		space:      newDiskSpace(cfg),
	}
	if b.verifier == nil {
		b.verifier = DevVerifier{}
		b.log.Warn("auth: dev verifier accepts any token (loopback only)")
	}
	b.mu.conns = map[*conn]struct{}{}
	b.mu.perSource = map[netip.Addr]int{}
	b.load.at = time.Now()
	b.metrics = newMetrics(b) // before the catalog: reopening it may count corruption
	b.raft = newRaftHost(b)
	b.streams = newRegistry(func(st *stream, id int) (*shard, error) { return newShard(b, st, id) }, b.metrics.streams)
	b.caches = newCacheRegistry()
	if cfg.DataDir != "" {
		if err := b.reopenCatalog(); err != nil {
			b.closeShardsNow()
			return nil, err
		}
	}
	b.stopRetention = make(chan struct{})
	b.retentionDone = make(chan struct{})
	go b.retentionLoop()
	return b, nil
}

// CreateStream registers a stream (ErrStreamExists, ErrInvalidStream). A
// durable stream opens (or recovers) its shard logs and is recorded in the
// data directory's catalog, so a restarted broker reopens it.
func (b *Broker) CreateStream(spec StreamSpec) error {
	if spec.replicated() && b.cfg.NodeID == "" {
		return fmt.Errorf("%w: replicas %d: replicated streams need cluster mode (FELIX_NODE_ID and a control plane)", ErrInvalidStream, spec.Replicas)
	}
	b.catalogMu.Lock()
	defer b.catalogMu.Unlock()
	// A creation that fails part-way (a shard that cannot open, no space,
	// the catalog) leaves nothing behind.
	made := b.newShardDirs(spec)
	undo := func() {
		for _, d := range made {
			os.RemoveAll(d)
		}
	}
	st, err := b.streams.create(spec, func(st *stream) error {
		if !st.spec.Durable {
			return nil
		}
		c, err := loadCatalog(b.cfg.DataDir)
		if err == nil {
			c.Streams = append(c.Streams, st.spec)
			err = saveCatalog(b.cfg.Storage.FS, b.cfg.DataDir, c)
		}
		if err != nil {
			return fmt.Errorf("broker: recording durable stream %s: %w", spec.StreamKey, err)
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, ErrStreamExists) {
			undo()
		}
		return err
	}
	b.openPlacedShards(st)
	b.log.Info("stream created", "stream", spec.String(), "shards", spec.Shards, "durable", spec.Durable, "fsync", st.spec.Fsync)
	return nil
}

// reopenCatalog recreates the durable streams and caches recorded in the data
// directory, recovering their logs.
func (b *Broker) reopenCatalog() error {
	c, err := loadCatalog(b.cfg.DataDir)
	if err != nil {
		return err
	}
	b.reopening = true
	defer func() { b.reopening = false }()
	for _, spec := range c.Streams {
		if _, err := b.streams.create(spec, nil); err != nil {
			return fmt.Errorf("broker: reopening %s: %w", spec.StreamKey, err)
		}
	}
	for _, spec := range c.Caches {
		if _, err := b.caches.create(b, spec, nil); err != nil {
			return fmt.Errorf("broker: reopening cache %s: %w", spec.CacheKey, err)
		}
	}
	return nil
}

// Streams lists the registered streams.
func (b *Broker) Streams() []StreamSpec {
	var out []StreamSpec
	for _, st := range b.streams.list() {
		out = append(out, st.spec)
	}
	return out
}

// quicConfig is the server's QUIC configuration. Per connection,
// GetConfigForClient applies the MTU policy for the peer's address (quic-go
// skips its own validation there; udp.MTUPolicy clamps), and every
// connection records MTU, losses and congestion through udp.StatsTracer
// (unless Config.NoConnTrace).
func (b *Broker) quicConfig() *quic.Config {
	c := b.baseQUICConfig()
	c.GetConfigForClient = func(ci *quic.ClientInfo) (*quic.Config, error) {
		if err := b.admit(ci.RemoteAddr); err != nil {
			return nil, err
		}
		pc := b.baseQUICConfig()
		b.mtuFor(ci.RemoteAddr).Apply(pc)
		return pc, nil
	}
	return c
}

// QUICConfig is the QUIC configuration a broker with cfg gives a
// connection from peer once it authenticated (its connection window may
// grow): bare quic-go measured on the broker's terms, as the floor under
// an acked publish, uses it.
func QUICConfig(cfg Config, peer net.Addr) *quic.Config {
	cfg = cfg.withDefaults()
	c := baseQUICConfig(cfg)
	c.AllowConnectionWindowIncrease = nil
	udp.MTUPolicy(runtime.GOOS, peer, udp.MTUKnobs{InitialMTU: cfg.InitialMTU}).Apply(c)
	return c
}

func (b *Broker) mtuFor(peer net.Addr) udp.MTUSettings {
	return b.stalls.settings(peer, udp.MTUPolicy(runtime.GOOS, peer, udp.MTUKnobs{InitialMTU: b.cfg.InitialMTU}))
}

func (b *Broker) baseQUICConfig() *quic.Config { return baseQUICConfig(b.cfg) }

func baseQUICConfig(cfg Config) *quic.Config {
	return &quic.Config{
		Tracer:                         udp.StatsTracer,
		MaxIdleTimeout:                 30 * time.Second,
		KeepAlivePeriod:                10 * time.Second,
		InitialStreamReceiveWindow:     uint64(cfg.StreamReceiveWindow),
		MaxStreamReceiveWindow:         uint64(cfg.StreamReceiveWindow),
		InitialConnectionReceiveWindow: cfg.preAuthWindow(),
		MaxConnectionReceiveWindow:     uint64(cfg.ConnectionReceiveWindow),
		AllowConnectionWindowIncrease:  allowWindowIncrease,
		MaxIncomingStreams:             cfg.MaxIncomingStreams,
		MaxIncomingUniStreams:          cfg.MaxIncomingStreams,
		// Only so clients may send liveness probes (DATAGRAM frames, see
		// client's session.probe); the broker never reads them, and
		// quic-go drops what exceeds its small receive queue.
		EnableDatagrams: true,
	}
}

// Serve accepts connections on pc until Drain or Close. The packet conn is
// the seam for the transport: a plain *net.UDPConn today, the udp package's
// batched conn later. Serve does not close pc.
func (b *Broker) Serve(pc net.PacketConn) error {
	tlsConf := b.cfg.TLS.Clone()
	tlsConf.NextProtos = []string{ALPN}
	tr := &quic.Transport{Conn: pc, StatelessResetKey: statelessResetKey(tlsConf),
		ConnContext: func(ctx context.Context, ci *quic.ClientInfo) (context.Context, error) {
			if b.draining.Load() {
				return nil, ErrDraining // refused at once (Drain)
			}
			ctx = withConnState(ctx)
			if b.cfg.NoConnTrace && b.cfg.ConnStatsInterval == 0 {
				return ctx, nil // udp.StatsTracer then gives quic-go no tracer
			}
			return udp.WithConnStats(ctx, udp.NewConnStats(b.mtuFor(ci.RemoteAddr).InitialPacketSize)), nil
		}}
	ln, err := tr.Listen(tlsConf, b.quicConfig())
	if err != nil {
		return fmt.Errorf("broker: listen: %w", err)
	}
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		ln.Close()
		return ErrDraining
	}
	b.mu.listeners = append(b.mu.listeners, ln)
	b.serving.Add(1)
	b.mu.Unlock()
	defer b.serving.Done()
	defer tr.Close()
	b.ready.Store(true)
	b.listenOnce.Do(func() { close(b.listening) })
	b.log.Info("serving", "addr", pc.LocalAddr().String())
	for {
		qc, err := ln.Accept(context.Background())
		if err != nil {
			if errors.Is(err, quic.ErrServerClosed) || b.draining.Load() {
				b.waitConns()
				return nil
			}
			return fmt.Errorf("broker: accept: %w", err)
		}
		b.handle(qc)
	}
}

func (b *Broker) handle(qc *quic.Conn) {
	c := newConn(b, qc)
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		qc.CloseWithError(connErrShutdown, "broker shutting down")
		return
	}
	b.rememberLocked(c)
	b.work.Add(1)
	b.mu.Unlock()
	b.metrics.connections.Inc()
	go func() {
		defer b.work.Done()
		c.serve()
		b.mu.Lock()
		b.forgetLocked(c)
		b.mu.Unlock()
		b.metrics.connections.Dec()
	}()
}

func (b *Broker) waitConns() { b.work.Wait() }

// conns returns the open connections.
func (b *Broker) conns() []*conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*conn, 0, len(b.mu.conns))
	for c := range b.mu.conns {
		out = append(out, c)
	}
	return out
}

// Listening is closed once the broker accepts connections.
func (b *Broker) Listening() <-chan struct{} { return b.listening }

// Ready reports whether the broker serves and is not draining.
func (b *Broker) Ready() bool { return b.ready.Load() && !b.draining.Load() }

// Drain shuts the broker down gracefully: readiness flips, listeners refuse
// new connections, new publishes and subscribes are refused, subscriber queues are
// flushed to their streams, and then every connection is closed with
// CONNECTION_CLOSE and a reason. ctx bounds the whole drain; what is left
// when it ends is closed at once.
func (b *Broker) Drain(ctx context.Context) error {
	b.handOffLeaderships(ctx)
	b.draining.Store(true)
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.closed = true
	listeners := b.mu.listeners
	b.mu.Unlock()
	// The listeners stay open until the connections are drained, refusing
	// every new handshake at once (CONNECTION_REFUSED, see Serve): closed,
	// they would drop it unanswered from a socket still open, and a client
	// sent here by a redirect (a leadership being handed over) would wait
	// out its dial timeout before trying another broker. Closed without
	// b.mu: a listener's Close waits for its packet loop, which may be in
	// the admission hook (admit), waiting for b.mu.
	closeListeners := sync.OnceFunc(func() {
		for _, ln := range listeners {
			ln.Close()
		}
	})
	defer closeListeners()

	if err := b.waitInflight(ctx); err != nil {
		return err
	}
	conns := b.conns()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.drain(ctx) }()
	}
	wg.Wait()
	closeListeners()
	done := make(chan struct{})
	go func() { b.work.Wait(); b.serving.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("broker: drain: %w", ctx.Err())
	}
	return b.closeShards()
}

// waitInflight waits for publishes that passed their draining check before
// the flag was set. Subscribers are still served meanwhile, so a publish
// waiting for room in a Block queue completes.
func (b *Broker) waitInflight(ctx context.Context) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for b.inflight.Load() > 0 {
		select {
		case <-t.C:
		case <-ctx.Done():
			for _, c := range b.conns() {
				c.qc.CloseWithError(connErrShutdown, "broker shutting down")
			}
			return fmt.Errorf("broker: drain: %w", ctx.Err())
		}
	}
	return nil
}

// Close shuts down at once (a drain with no budget) and waits until every
// goroutine of the broker has returned.
func (b *Broker) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Drain(ctx) // a drain without budget always reports the cancelled context
	b.work.Wait()
	b.serving.Wait()
	return b.closeShards()
}

// closeShardsNow closes the shards opened so far (a failed New).
func (b *Broker) closeShardsNow() {
	defer b.raft.close()
	for _, st := range b.streams.list() {
		for _, sh := range st.shards {
			sh.close()
		}
	}
	for _, c := range b.caches.list() {
		c.close()
	}
}

// closeShards stops retention and closes every shard and cache once:
// durable ones get their final sync. Errors are kept for Close and Drain to report.
func (b *Broker) closeShards() error {
	b.closeOnce.Do(func() {
		close(b.stopRetention)
		<-b.retentionDone
		b.groups.closeAll() // final group state writes, while the logs are open
		var errs []error
		for _, st := range b.streams.list() {
			for _, sh := range st.shards {
				errs = append(errs, sh.close())
			}
		}
		for _, c := range b.caches.list() {
			errs = append(errs, c.close())
		}
		b.raft.close()
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// retentionLoop applies the durable shards' retention bounds off the append
// path.
func (b *Broker) retentionLoop() {
	defer close(b.retentionDone)
	t := time.NewTicker(b.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stopRetention:
			return
		case now := <-t.C:
			for _, st := range b.streams.list() {
				for _, sh := range st.shards {
					if n, err := sh.enforceRetention(now); err != nil {
						b.log.Error("retention failed", "stream", st.spec.String(), "shard", sh.id, "err", err)
					} else if n > 0 {
						b.log.Info("retention removed segments", "stream", st.spec.String(), "shard", sh.id, "segments", n)
					}
				}
			}
		}
	}
}

// Pool exposes buffer accounting for leak checks in tests and soak runs.
func (b *Broker) Pool() fanout.PoolStats { return b.pool.Stats() }

var _ = tls.VersionTLS13
