package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/fanout"
)

// Broker serves Felix over QUIC.
type Broker struct {
	cfg      Config
	log      *slog.Logger
	verifier Verifier
	pool     *fanout.Pool
	streams  *registry
	metrics  *metrics

	nextConnID atomic.Uint64
	nextSubID  atomic.Uint64
	ready      atomic.Bool
	draining   atomic.Bool
	inflight   atomic.Int64  // publishes between their draining check and their return
	listening  chan struct{} // closed when the first listener accepts
	listenOnce sync.Once

	mu struct {
		sync.Mutex
		conns     map[*conn]struct{}
		listeners []*quic.Listener
		closed    bool
	}
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
	b := &Broker{
		cfg:       cfg,
		log:       cfg.Logger,
		verifier:  cfg.Verifier,
		pool:      &fanout.Pool{},
		listening: make(chan struct{}),
	}
	if b.verifier == nil {
		b.verifier = DevVerifier{}
		b.log.Warn("auth: dev verifier accepts any token (loopback only)")
	}
	b.mu.conns = map[*conn]struct{}{}
	b.streams = newRegistry(func(st *stream, id int) *shard { return newShard(b, st, id) })
	b.metrics = newMetrics(b)
	return b, nil
}

// CreateStream registers a stream (ErrStreamExists, ErrInvalidStream).
func (b *Broker) CreateStream(spec StreamSpec) error {
	_, err := b.streams.create(spec)
	if err == nil {
		b.log.Info("stream created", "stream", spec.String(), "shards", spec.Shards)
	}
	return err
}

// Streams lists the registered streams.
func (b *Broker) Streams() []StreamSpec {
	var out []StreamSpec
	for _, st := range b.streams.list() {
		out = append(out, st.spec)
	}
	return out
}

func (b *Broker) quicConfig() *quic.Config {
	return &quic.Config{
		MaxIdleTimeout:                 30 * time.Second,
		KeepAlivePeriod:                10 * time.Second,
		InitialStreamReceiveWindow:     uint64(b.cfg.StreamReceiveWindow),
		MaxStreamReceiveWindow:         uint64(b.cfg.StreamReceiveWindow),
		InitialConnectionReceiveWindow: uint64(b.cfg.ConnectionReceiveWindow),
		MaxConnectionReceiveWindow:     uint64(b.cfg.ConnectionReceiveWindow),
		MaxIncomingStreams:             b.cfg.MaxIncomingStreams,
		MaxIncomingUniStreams:          b.cfg.MaxIncomingStreams,
	}
}

// Serve accepts connections on pc until Drain or Close. The packet conn is
// the seam for the transport: a plain *net.UDPConn today, the udp package's
// batched conn later. Serve does not close pc.
func (b *Broker) Serve(pc net.PacketConn) error {
	tlsConf := b.cfg.TLS.Clone()
	tlsConf.NextProtos = []string{ALPN}
	tr := &quic.Transport{Conn: pc}
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
	b.mu.conns[c] = struct{}{}
	b.work.Add(1)
	b.mu.Unlock()
	b.metrics.connections.Inc()
	go func() {
		defer b.work.Done()
		c.serve()
		b.mu.Lock()
		delete(b.mu.conns, c)
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

// Drain shuts the broker down gracefully: readiness flips, listeners stop
// accepting, new publishes and subscribes are refused, subscriber queues are
// flushed to their streams, and then every connection is closed with
// CONNECTION_CLOSE and a reason. ctx bounds the whole drain; what is left
// when it ends is closed at once.
func (b *Broker) Drain(ctx context.Context) error {
	b.draining.Store(true)
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.closed = true
	for _, ln := range b.mu.listeners {
		ln.Close()
	}
	b.mu.Unlock()

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
	done := make(chan struct{})
	go func() { b.work.Wait(); b.serving.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("broker: drain: %w", ctx.Err())
	}
	b.closeShards()
	return nil
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
	b.closeShards()
	return nil
}

func (b *Broker) closeShards() {
	for _, st := range b.streams.list() {
		for _, sh := range st.shards {
			sh.close()
		}
	}
}

// Pool exposes buffer accounting for leak checks in tests and soak runs.
func (b *Broker) Pool() fanout.PoolStats { return b.pool.Stats() }

var _ = tls.VersionTLS13
