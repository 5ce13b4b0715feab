// Package forward is the broker-to-broker publish path of cluster mode, built
// on the client package: cmd/felix-broker hands a Forwarder to the broker as
// its broker.Forwarder (an interface the broker declares, so neither package
// imports the other). It keeps one client.Client
// per (owner address, tenant) — streams authenticate per tenant — and one
// client.Publisher per stream on it, so forwards to one owner share a
// pooled QUIC connection and keep their order per stream. Every stream it
// opens advertises wire.CapForwarded, so the owner never forwards again,
// and authenticates with the broker's node credential.
package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// Config configures a Forwarder.
type Config struct {
	// TLS says how to trust the other brokers (the cluster's CA).
	TLS *tls.Config
	// Token is the node credential every forwarding stream authenticates
	// with; the owner's verifier must accept it for the publish's tenant.
	Token string
	// TokenFunc, if set, replaces Token: asked at every dial and stream
	// open, so a renewed credential is used from then on.
	TokenFunc func() string
	// DialTimeout bounds connecting to an owner; 0 means 2 s. A publish
	// waiting on it holds its publisher's stream.
	DialTimeout time.Duration
	// RetryAfter is how long an owner that could not be reached is
	// answered owner_unavailable without a new dial; 0 means 500 ms.
	RetryAfter time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

type connKey struct{ addr, tenant string }

type pubKey struct {
	connKey
	namespace, stream string
}

// Forwarder forwards publishes to shard owners. Safe for concurrent use.
type Forwarder struct {
	cfg Config
	mu  struct {
		sync.Mutex
		conns   map[connKey]*client.Client
		pubs    map[pubKey]*client.Publisher
		opened  map[*client.Publisher]string // the credential each stream authenticated with
		dialing map[connKey]*sync.Mutex      // held while dialling or opening a stream
		failed  map[string]time.Time         // owner address → last failed dial
		closed  bool
	}
}

// New returns a Forwarder; it dials owners when first needed.
func New(cfg Config) *Forwarder {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{cfg: cfg}
	f.mu.conns = map[connKey]*client.Client{}
	f.mu.pubs = map[pubKey]*client.Publisher{}
	f.mu.opened = map[*client.Publisher]string{}
	f.mu.failed = map[string]time.Time{}
	f.mu.dialing = map[connKey]*sync.Mutex{}
	return f
}

// Forward sends payloads to shard s on owner and calls done exactly once
// (it implements broker.Forwarder): for an acked publish with the offset of
// the first record and whether the owner sent one, or the owner's refusal
// (its typed error kept); for a fire-and-forget one once written. A failure
// to reach the owner wraps cluster.ErrOwnerUnavailable.
func (f *Forwarder) Forward(owner cluster.Member, s cluster.Shard, payloads [][]byte, acked bool, done func(uint64, bool, error)) {
	k := pubKey{connKey{owner.QUICAddr, s.Tenant}, s.Namespace, s.Stream}
	pub, err := f.publisher(k)
	if err != nil {
		done(0, false, unavailable(owner, err))
		return
	}
	if !acked {
		if err := pub.SendShard(uint32(s.Shard), payloads); err != nil {
			f.drop(k, pub)
			done(0, false, unavailable(owner, err))
			return
		}
		done(0, false, nil)
		return
	}
	pa := pub.PublishShardAsync(uint32(s.Shard), payloads)
	go func() {
		err := pa.Wait(context.Background())
		var be *client.BrokerError
		switch {
		case err == nil:
			res := pa.Result()
			done(res.Offset, res.HasOffset, nil)
		case errors.As(err, &be):
			done(0, false, &relayed{msg: be.Message, typed: be.Err, owner: be.Owner}) // the owner's answer, as it gave it
		default:
			// Sent, and no answer: the owner may or may not have applied it.
			f.drop(k, pub)
			done(0, false, fmt.Errorf("%w (%w): shard owner %s (%s) lost mid-publish: %v",
				cluster.ErrOwnerUnavailable, cluster.ErrUnacknowledged, owner.ID, owner.QUICAddr, err))
		}
	}()
}

// relayed is the owner's refusal, passed on with its message and typed
// error unchanged.
type relayed struct {
	msg   string
	typed *wire.TypedError
	owner *wire.Owner
}

func (r *relayed) Error() string { return r.msg }

// TypedError is the owner's typed error, nil when it sent none.
func (r *relayed) TypedError() *wire.TypedError { return r.typed }

// NamedOwner is the owner the answer named (a not_leader refusal names the
// shard's leader), nil when it named none.
func (r *relayed) NamedOwner() *wire.Owner { return r.owner }

func unavailable(owner cluster.Member, err error) error {
	return fmt.Errorf("%w: shard owner %s (%s) unreachable: %v", cluster.ErrOwnerUnavailable, owner.ID, owner.QUICAddr, err)
}

// publisher returns the pooled publisher for k, dialling the owner and
// opening the stream when needed. Dials and stream opens hold only k's
// connection lock, so an owner that does not answer delays forwards to it,
// never those to other owners.
func (f *Forwarder) publisher(k pubKey) (*client.Publisher, error) {
	f.mu.Lock()
	if p, err := f.pooledLocked(k); p != nil || err != nil {
		f.mu.Unlock()
		return p, err
	}
	kl := f.mu.dialing[k.connKey]
	if kl == nil {
		kl = &sync.Mutex{}
		f.mu.dialing[k.connKey] = kl
	}
	f.mu.Unlock()

	kl.Lock()
	defer kl.Unlock()
	f.mu.Lock()
	p, err := f.pooledLocked(k) // opened while we waited?
	if p == nil && err == nil {
		if at, ok := f.mu.failed[k.addr]; ok && time.Since(at) < f.cfg.RetryAfter {
			err = errors.New("recent dial failed")
		}
	}
	c := f.mu.conns[k.connKey]
	f.mu.Unlock()
	if p != nil || err != nil {
		return p, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.DialTimeout)
	defer cancel()
	if c == nil {
		c, err = client.Dial(ctx, k.addr, client.Config{
			Tenant: k.tenant, Token: f.cfg.Token, TokenFunc: f.cfg.TokenFunc, TLS: f.cfg.TLS, Logger: f.cfg.Logger,
			Flags: wire.KnownCapabilities | wire.CapForwarded,
		})
		f.mu.Lock()
		switch {
		case err != nil:
			f.mu.failed[k.addr] = time.Now()
		case f.mu.closed:
			go c.Close()
			err = client.ErrClosed
		default:
			f.mu.conns[k.connKey] = c
		}
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	p, err = c.NewPublisher(ctx, k.namespace, k.stream)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err != nil:
		f.closeConnLocked(k.connKey)
		f.mu.failed[k.addr] = time.Now()
		return nil, err
	case f.mu.closed:
		return nil, client.ErrClosed // Close closed c
	}
	delete(f.mu.failed, k.addr)
	f.mu.pubs[k] = p
	f.mu.opened[p] = f.token()
	return p, nil
}

func (f *Forwarder) token() string {
	if f.cfg.TokenFunc != nil {
		return f.cfg.TokenFunc()
	}
	return f.cfg.Token
}

// pooledLocked is k's open publisher, nil if there is none yet. The owner
// ends a forwarded stream when the credential it authenticated with
// expires, so a stream opened with a credential since renewed is retired
// (closed once its acks are in) and the next one opened with the renewed
// credential, long before the old one expires; one that failed is retired
// too.
func (f *Forwarder) pooledLocked(k pubKey) (*client.Publisher, error) {
	if f.mu.closed {
		return nil, client.ErrClosed
	}
	p := f.mu.pubs[k]
	if p != nil && (p.Err() != nil || f.mu.opened[p] != f.token()) {
		delete(f.mu.pubs, k)
		delete(f.mu.opened, p)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
			defer cancel()
			p.Close(ctx)
		}()
		return nil, nil
	}
	return p, nil
}

// retireTimeout bounds waiting for the acks of a retired stream.
const retireTimeout = 10 * time.Second

// drop forgets a publisher whose stream failed and the connection under
// it, so the next forward dials again.
func (f *Forwarder) drop(k pubKey, p *client.Publisher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.pubs[k] != p {
		return // already replaced
	}
	f.closeConnLocked(k.connKey)
}

func (f *Forwarder) closeConnLocked(ck connKey) {
	for pk, p := range f.mu.pubs {
		if pk.connKey == ck {
			delete(f.mu.pubs, pk)
			delete(f.mu.opened, p)
		}
	}
	if c := f.mu.conns[ck]; c != nil {
		delete(f.mu.conns, ck)
		go c.Close() // Close waits for the client's goroutines
	}
}

// Close closes every connection to other brokers; later forwards fail.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	f.mu.closed = true
	conns := f.mu.conns
	f.mu.conns, f.mu.pubs = map[connKey]*client.Client{}, map[pubKey]*client.Publisher{}
	f.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}
