package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
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
}

// ClusterClient routes each shard's publishes and subscribes to the broker
// that owns it. It learns owners from the placement (SetPlacement, or a
// api.Watcher feeding it) and from acks that name the owner, keeps one
// Client per broker, and re-routes when the placement changes, when a
// broker answers not_owner, or when an owner's connection fails.
//
// Delivery: a publish whose ack arrived was applied exactly once by the
// owner (forwarding never loops). A publish that failed without an ack —
// the owner's connection broke, the owner became unavailable — may or may
// not have been applied: ClusterClient does not retry it, and a caller that
// retries gets at-least-once (the retry goes to the current owner). This
// is the contract of Publisher, whose stream ends with its connection.
//
// Safe for concurrent use; the order of one shard's publishes is the order
// of the calls that made them, while its owner stays the same.
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
	cc := &ClusterClient{cfg: cfg}
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
	if p := cc.mu.pubs[k]; p != nil && p.c.alive() {
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

// learn records what an ack or refusal said about s's owner, and forgets
// a connection that failed under the publish.
func (cc *ClusterClient) learn(s cluster.Shard, addr string, pa *PendingAck) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	own, named := pa.Owner()
	var be *BrokerError
	switch {
	case named && own.Addr != "" && (pa.err == nil || errors.Is(pa.err, ErrNotOwner)):
		cc.mu.learned[s] = own.Addr
	case pa.err != nil && !errors.As(pa.err, &be) && !errors.Is(pa.err, ErrNotNegotiated):
		cc.forgetLocked(addr) // the connection failed: redial or re-route
	}
}

// PublishAsync sends an acked batch to shard of namespace/stream on the
// shard's owner and returns without waiting; the ack teaches the route.
func (cc *ClusterClient) PublishAsync(ctx context.Context, namespace, stream string, shard uint32, payloads [][]byte) *PendingAck {
	s := cc.shard(namespace, stream, shard)
	cc.mu.Lock()
	addr := cc.routeLocked(s)
	cc.mu.Unlock()
	p, err := cc.publisher(ctx, addr, namespace, stream)
	if err != nil {
		pa := &PendingAck{done: make(chan struct{}), err: err}
		close(pa.done)
		return pa
	}
	return p.publishShardLearning(shard, payloads, func(pa *PendingAck) { cc.learn(s, addr, pa) })
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
// not_owner naming the owner teaches the route, and the subscribe is tried
// there once.
func (cc *ClusterClient) Subscribe(ctx context.Context, namespace, stream string, opts SubscribeOptions) (*Subscription, error) {
	s := cc.shard(namespace, stream, opts.Shard)
	for attempt := 0; ; attempt++ {
		cc.mu.Lock()
		addr := cc.routeLocked(s)
		c, err := cc.clientLocked(ctx, addr)
		cc.mu.Unlock()
		if err != nil {
			return nil, err
		}
		sub, err := c.Subscribe(ctx, namespace, stream, opts)
		var be *BrokerError
		switch {
		case err == nil || attempt > 0:
			return sub, err
		case errors.As(err, &be) && errors.Is(err, ErrNotOwner) && be.Owner != nil && be.Owner.Addr != addr:
			cc.mu.Lock()
			cc.mu.learned[s] = be.Owner.Addr
			cc.mu.Unlock()
		case errors.As(err, &be):
			return sub, err
		default: // the connection failed: once more on a new one
			cc.mu.Lock()
			cc.forgetLocked(addr)
			cc.mu.Unlock()
		}
	}
}

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
