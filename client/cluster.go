package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/wire"
)

// ClusterConfig configures a ClusterClient.
type ClusterConfig struct {
	// Config is used for every broker connection (tenant, token, TLS...).
	// Flags must keep wire.CapOwner and wire.CapShard (the default does).
	Config
	// Bootstrap lists broker addresses ("host:port"); the first that
	// answers serves shards whose owner is not known yet, forwarding them
	// (its acks then name the owner).
	Bootstrap []string
	// ControlPlaneURL, when set, is followed for the placement with a
	// api.Watcher authenticated with ControlPlaneToken (any valid Felix
	// token of the cluster; empty: Config.Token or TokenFunc), so that
	// shards route to their owner from the first publish and re-route when
	// they move.
	ControlPlaneURL   string
	ControlPlaneToken string
	// DialTimeout bounds connecting to a broker other than the bootstrap
	// one (an owner that just died answers nothing); 0 means 2 s.
	DialTimeout time.Duration
	// Attempts bounds how many times a publish or a subscribe is sent
	// while brokers refuse it in a way that says it was not applied and
	// may work elsewhere or later (not_leader, shard_unavailable,
	// draining, overloaded), or the broker routed to cannot be reached: 0
	// means 10 (about 3 s of backoff), 1 sends each once. The caller's
	// context bounds the time as well.
	Attempts int
}

// ClusterClient routes each shard's publishes and subscribes to the broker
// that owns it. It learns owners from the placement (SetPlacement, or a
// api.Watcher feeding it) and from acks that name the owner, keeps one
// Client per broker, and re-routes when the placement changes, when a
// broker answers not_owner / not_leader, or when an owner's connection
// fails.
//
// A refusal that says the request was not applied (not_leader naming the
// leader, shard_unavailable while a leader is elected, draining,
// overloaded) is not the caller's to handle: the request is sent again,
// to the owner the refusal named, or else to the next replica of a
// replicated shard (or the placement's owner, or the next bootstrap
// broker), backing off from 10 ms, at most ClusterConfig.Attempts times
// and while the caller's context lasts. The caller sees the last refusal
// only when those run out.
//
// Delivery: a publish whose ack arrived was applied exactly once by the
// owner (forwarding never loops, and only refused or unsent publishes are
// sent again). A publish that failed without an ack — the owner's
// connection broke with it in flight, leadership_lost, quorum_timeout,
// unacknowledged: outcome unknown — may or may not have been applied:
// ClusterClient does not send it again, and a caller that does gets
// at-least-once (IdempotentPublisher re-sends safely). This is the
// contract of Publisher, whose stream ends with its connection.
//
// Safe for concurrent use; the order of one shard's publishes is the order
// of the calls that made them while its owner stays the same: a publish
// sent again after a refusal may land after ones made later (publish with
// one in flight, waiting for each ack, to keep the order across moves).
type ClusterClient struct {
	cfg     ClusterConfig
	watcher *api.Watcher // nil without ControlPlaneURL
	mu      struct {
		sync.Mutex
		clients   map[string]*Client // by broker QUIC address
		pubs      map[clusterPubKey]*Publisher
		learned   map[cluster.Shard]string // owner address from acks
		placement *cluster.Index
		bootstrap string
		closed    bool
	}
	// send publishes payloads to shard s on addr; hook gets the outcome.
	// An error means nothing was sent. sendShard, but for tests of the
	// retries.
	send func(ctx context.Context, addr string, s cluster.Shard, payloads [][]byte, hook func(*PendingAck)) error
	// resends counts requests sent again (Resends).
	resends atomic.Uint64
}

type clusterPubKey struct{ addr, namespace, stream string }

// DialCluster connects to the first bootstrap broker that answers.
func DialCluster(ctx context.Context, cfg ClusterConfig) (*ClusterClient, error) {
	if len(cfg.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: ClusterConfig.Bootstrap is empty", ErrInvalidConfig)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.Attempts < 0 {
		return nil, fmt.Errorf("%w: ClusterConfig.Attempts %d is negative", ErrInvalidConfig, cfg.Attempts)
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = defaultAttempts
	}
	cc := &ClusterClient{cfg: cfg}
	cc.send = cc.sendShard
	cc.mu.clients = map[string]*Client{}
	cc.mu.pubs = map[clusterPubKey]*Publisher{}
	cc.mu.learned = map[cluster.Shard]string{}
	var errs []error
	for _, addr := range cfg.Bootstrap {
		c, err := Dial(ctx, addr, cfg.Config)
		if err == nil {
			cc.mu.clients[addr] = c
			cc.mu.bootstrap = addr
			return cc, cc.follow(cfg)
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("client: no bootstrap broker answered: %w", errors.Join(errs...))
}

// follow starts the placement watcher when a control plane is configured.
func (cc *ClusterClient) follow(cfg ClusterConfig) error {
	if cfg.ControlPlaneURL == "" {
		return nil
	}
	token, tokenFunc := cfg.ControlPlaneToken, (func() string)(nil)
	if token == "" {
		token, tokenFunc = cfg.Token, cfg.TokenFunc
	}
	w, err := api.NewWatcher(api.WatcherConfig{URL: cfg.ControlPlaneURL, Token: token, TokenFunc: tokenFunc, Logger: cfg.Logger,
		OnChange: func(x *cluster.Index) { cc.setIndex(x) }})
	if err != nil {
		cc.Close()
		return fmt.Errorf("client: placement watch: %w", err)
	}
	cc.watcher = w
	return nil
}

// SetPlacement routes by p from now on (nil: by learned owners and the
// bootstrap broker only). Owners learned from acks yield to p.
func (cc *ClusterClient) SetPlacement(p *cluster.Placement) {
	var x *cluster.Index
	if p != nil {
		x = cluster.NewIndex(*p)
	}
	cc.setIndex(x)
}

func (cc *ClusterClient) setIndex(x *cluster.Index) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.mu.placement = x
	clear(cc.mu.learned)
}

// Owner is the address shard s is routed to now.
func (cc *ClusterClient) Owner(s cluster.Shard) string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.routeLocked(s)
}

// routeLocked is the placement's owner of s, else the owner an answer
// named, else the bootstrap broker. A replicated shard's placement names
// only its preferred leader while raft picks the leader, so there an owner
// an answer named (the leader) comes first.
func (cc *ClusterClient) routeLocked(s cluster.Shard) string {
	addr, learned := cc.mu.learned[s]
	if cc.mu.placement != nil {
		a, ok := cc.mu.placement.Assignment(s)
		if learned && ok && a.Replicated() {
			return addr
		}
		if m, ok := cc.mu.placement.Owner(s); ok && m.Live && m.QUICAddr != "" {
			return m.QUICAddr
		}
	}
	if learned {
		return addr
	}
	return cc.mu.bootstrap
}

func (cc *ClusterClient) shard(namespace, stream string, shard uint32) cluster.Shard {
	return cluster.Shard{Tenant: cc.cfg.Tenant, Namespace: namespace, Stream: stream, Shard: int(shard)}
}

// client returns the Client for addr, dialling it when needed.
func (cc *ClusterClient) clientLocked(ctx context.Context, addr string) (*Client, error) {
	if cc.mu.closed {
		return nil, ErrClosed
	}
	if c := cc.mu.clients[addr]; c != nil {
		if c.alive() {
			return c, nil
		}
		cc.forgetLocked(addr) // the broker ended the connection (restarted, say)
	}
	ctx, cancel := context.WithTimeout(ctx, cc.cfg.DialTimeout)
	defer cancel()
	c, err := Dial(ctx, addr, cc.cfg.Config)
	if err != nil {
		return nil, err
	}
	cc.mu.clients[addr] = c
	return c, nil
}

// publisher returns the pooled Publisher of namespace/stream on addr.
func (cc *ClusterClient) publisher(ctx context.Context, addr, namespace, stream string) (*Publisher, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	k := clusterPubKey{addr, namespace, stream}
	if p := cc.mu.pubs[k]; p != nil && p.c.alive() && !p.broken() {
		return p, nil
	}
	c, err := cc.clientLocked(ctx, addr)
	if err != nil {
		return nil, err
	}
	p, err := c.NewPublisher(ctx, namespace, stream)
	if err != nil {
		cc.forgetLocked(addr)
		return nil, err
	}
	cc.mu.pubs[k] = p
	return p, nil
}

// forgetLocked drops the connection to addr and what was learned about it,
// after it failed: its shards route by placement or the bootstrap broker.
func (cc *ClusterClient) forgetLocked(addr string) {
	for k := range cc.mu.pubs {
		if k.addr == addr {
			delete(cc.mu.pubs, k)
		}
	}
	for s, a := range cc.mu.learned {
		if a == addr {
			delete(cc.mu.learned, s)
		}
	}
	if c := cc.mu.clients[addr]; c != nil {
		delete(cc.mu.clients, addr)
		go c.Close()
	}
}

// learn records what an answer (own, err) of addr taught about s's route:
// an owner an ack or a not_owner refusal named becomes it; a refusal
// naming none that says s is not served there, or a broker that could
// not be reached or whose connection failed, steers s away from addr
// (steerLocked), the connection then forgotten.
func (cc *ClusterClient) learn(s cluster.Shard, addr string, own *wire.Owner, err error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	var be *BrokerError
	switch {
	case own != nil && own.Addr != "" && (err == nil || errors.Is(err, ErrNotOwner)):
		cc.mu.learned[s] = own.Addr
	case err == nil, !steering(err):
	case errors.As(err, &be):
		cc.steerLocked(s, addr)
	default:
		cc.forgetLocked(addr) // the connection failed: redial or re-route
		cc.steerLocked(s, addr)
	}
}

// steerLocked routes s away from addr, which did not serve it and named
// no owner: to the next live replica after addr of a replicated shard's
// set (any replica forwards to the leader, and its ack names it);
// otherwise what was learned about s at addr is forgotten, so the
// placement's owner or the bootstrap broker serves it, and a bootstrap
// broker that failed gives way to the next one configured.
func (cc *ClusterClient) steerLocked(s cluster.Shard, addr string) {
	if cc.mu.learned[s] == addr {
		delete(cc.mu.learned, s)
	}
	if addr == cc.mu.bootstrap && len(cc.cfg.Bootstrap) > 1 {
		if i := slices.Index(cc.cfg.Bootstrap, addr); i >= 0 {
			cc.mu.bootstrap = cc.cfg.Bootstrap[(i+1)%len(cc.cfg.Bootstrap)]
		}
	}
	if cc.mu.placement == nil {
		return
	}
	rs := cc.mu.placement.Replicas(s)
	i := slices.IndexFunc(rs, func(m cluster.Member) bool { return m.QUICAddr == addr })
	if i < 0 {
		return
	}
	for k := 1; k < len(rs); k++ {
		if m := rs[(i+k)%len(rs)]; m.Live && m.QUICAddr != "" {
			cc.mu.learned[s] = m.QUICAddr
			return
		}
	}
}

// PublishAsync sends an acked batch to shard of namespace/stream on the
// shard's owner and returns without waiting; the ack teaches the route.
// Refusals that say it was not applied send it again (see ClusterClient),
// while ctx lasts; the payloads are copied before it returns.
func (cc *ClusterClient) PublishAsync(ctx context.Context, namespace, stream string, shard uint32, payloads [][]byte) *PendingAck {
	q := &clusterPublish{cc: cc, ctx: ctx, s: cc.shard(namespace, stream, shard), payloads: payloads,
		out: &PendingAck{done: make(chan struct{}), sent: time.Now()}, r: newRetrier(cc.cfg.Attempts)}
	if cc.cfg.Attempts > 1 {
		q.payloads = clonePayloads(payloads)
	}
	q.attempt()
	return q.out
}

// sendShard is the send of a ClusterClient: on the pooled publisher of
// s's stream on addr.
func (cc *ClusterClient) sendShard(ctx context.Context, addr string, s cluster.Shard, payloads [][]byte, hook func(*PendingAck)) error {
	p, err := cc.publisher(ctx, addr, s.Namespace, s.Stream)
	if err != nil {
		return err
	}
	if !p.shards {
		return fmt.Errorf("%w: shard publishes", ErrNotNegotiated)
	}
	p.publishShardLearning(uint32(s.Shard), payloads, hook)
	return nil
}

// Publish is PublishAsync and Wait.
func (cc *ClusterClient) Publish(ctx context.Context, namespace, stream string, shard uint32, payloads [][]byte) error {
	return cc.PublishAsync(ctx, namespace, stream, shard, payloads).Wait(ctx)
}

// Send publishes fire-and-forget to the shard's owner (see Publisher.Send).
func (cc *ClusterClient) Send(ctx context.Context, namespace, stream string, shard uint32, payloads [][]byte) error {
	s := cc.shard(namespace, stream, shard)
	cc.mu.Lock()
	addr := cc.routeLocked(s)
	cc.mu.Unlock()
	p, err := cc.publisher(ctx, addr, namespace, stream)
	if err == nil {
		err = p.SendShard(shard, payloads)
	}
	if err != nil {
		cc.mu.Lock()
		cc.forgetLocked(addr)
		cc.mu.Unlock()
	}
	return err
}

// Subscribe subscribes to opts.Shard on its owner. A broker that answers
// not_owner naming the owner teaches the route; the subscribe is tried
// again there, and after a refusal that says to retry or a failed
// connection, as a publish is (see ClusterClient).
func (cc *ClusterClient) Subscribe(ctx context.Context, namespace, stream string, opts SubscribeOptions) (*Subscription, error) {
	s := cc.shard(namespace, stream, opts.Shard)
	r := newRetrier(cc.cfg.Attempts)
	for {
		cc.mu.Lock()
		addr := cc.routeLocked(s)
		c, err := cc.clientLocked(ctx, addr)
		cc.mu.Unlock()
		var sub *Subscription
		if err == nil {
			sub, err = c.Subscribe(ctx, namespace, stream, opts)
		}
		if err == nil {
			return sub, nil
		}
		var be *BrokerError
		var own *wire.Owner
		if errors.As(err, &be) {
			own = be.Owner
		}
		cc.learn(s, addr, own, err)
		cc.mu.Lock()
		to := cc.routeLocked(s)
		cc.mu.Unlock()
		wait, again := r.next(err, false, addr, to) // a subscribe applies nothing
		if !again {
			return nil, err
		}
		if werr := waitRetry(ctx, wait); werr != nil {
			return nil, stopped(err, werr)
		}
		cc.resends.Add(1)
	}
}

// Resends counts the publishes and subscribes sent again after a refusal
// or a broker that could not be reached (see ClusterClient).
func (cc *ClusterClient) Resends() uint64 { return cc.resends.Load() }

// Close stops following the placement and closes every broker connection.
func (cc *ClusterClient) Close() error {
	if cc.watcher != nil {
		cc.watcher.Close()
	}
	cc.mu.Lock()
	cc.mu.closed = true
	clients := cc.mu.clients
	cc.mu.clients, cc.mu.pubs = map[string]*Client{}, map[clusterPubKey]*Publisher{}
	cc.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	return nil
}
