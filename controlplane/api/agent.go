package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/cluster"
)

// AgentConfig configures an Agent.
type AgentConfig struct {
	// URL is the control plane's API, e.g. "http://127.0.0.1:7070".
	URL string
	// Token is the node credential (a Felix token with the cluster.node
	// permission), sent as "Authorization: Bearer".
	Token string
	// RenewToken makes the Agent renew the credential (POST /v1/token/node
	// with the credential itself, for its own subject) once half of its
	// remaining lifetime has passed; Token then returns the current one,
	// for the broker's other uses of it (a Watcher's TokenFunc).
	RenewToken bool
	// Member is this broker: its ID, addresses and zone (Live is
	// ignored).
	Member cluster.Member
	// HTTPClient sends the requests (ClientConfig.HTTPClient).
	HTTPClient *http.Client
	// RequestTimeout bounds each request (default 5s).
	RequestTimeout time.Duration
	// RetryDelay is the pause after a failed request (default 200ms); it
	// doubles up to a third of the lease while failures go on.
	RetryDelay time.Duration
	// Load, if set, is called before each keepalive and its result sent
	// with it: the publish rate of each shard the broker owns (see
	// KeepAliveRequest). nil sends an empty keepalive, as before.
	Load func() []cluster.ShardLoad
	// Replicas, if set, is called before each keepalive and its result
	// sent with it: a report of each replicated shard the broker leads
	// (see ReplicaReport; nil reports that it leads none). nil sends no
	// report, and the control plane keeps the previous one.
	Replicas func() []cluster.ReplicaReport
	// ReportNow, if set, makes the agent send a keepalive (with its
	// reports) as soon as it can receive from it, at most once per
	// RetryDelay, rather than waiting for the next renewal: a replicated
	// shard's membership changed, and the placer paces moves on reports.
	ReportNow <-chan struct{}
	// Logger receives failures and re-registrations; nil discards.
	Logger *slog.Logger
}

func (c AgentConfig) withDefaults() AgentConfig {
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 200 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Agent keeps one broker registered: it registers, renews the lease at a
// third of its TTL, registers again when a keepalive answers 404 (the lease
// lapsed, e.g. after a pause or a partition), and leaves on Close.
//
// One goroutine (pprof label goroutine=felix-cluster-agent) does all of
// it; Close stops it and waits.
type Agent struct {
	cfg   AgentConfig
	api   *Client
	ttl   atomic.Int64 // granted lease TTL, ns
	token atomic.Pointer[string]
	stop  context.CancelFunc
	done  chan struct{}
	once  sync.Once
	// With RenewToken: what to renew and when. Adopt may change them
	// while the goroutine runs.
	mu struct {
		sync.Mutex
		subject string    // the credential's sub
		renewAt time.Time // when to renew it
	}
}

// NewAgent registers cfg.Member and starts keeping it alive. The first
// registration is synchronous so that a wrong URL or credential fails
// here; ctx bounds it.
func NewAgent(ctx context.Context, cfg AgentConfig) (*Agent, error) {
	cfg = cfg.withDefaults()
	if cfg.Member.ID == "" || cfg.Member.QUICAddr == "" {
		return nil, fmt.Errorf("%w: agent member needs an ID and a QUIC address", ErrInvalid)
	}
	a := &Agent{cfg: cfg, done: make(chan struct{})}
	a.token.Store(&cfg.Token)
	c, err := NewClient(ClientConfig{URL: cfg.URL, Token: a.Token, RequestTimeout: cfg.RequestTimeout, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, err
	}
	a.api = c
	if cfg.RenewToken {
		sub, exp, ok := tokenClaims(cfg.Token)
		if !ok {
			return nil, fmt.Errorf("%w: RenewToken needs a JWT credential with sub and exp", ErrInvalid)
		}
		a.mu.subject, a.mu.renewAt = sub, halfway(time.Now(), exp)
	}
	if err := a.register(ctx); err != nil {
		return nil, err
	}
	lctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go pprof.Do(lctx, pprof.Labels("goroutine", "felix-cluster-agent"), a.run)
	return a, nil
}

// Token returns the current node credential (renewed with RenewToken).
func (a *Agent) Token() string { return *a.token.Load() }

// Adopt makes tok the credential from now on: one rotated from outside the
// Agent (an operator or a sidecar rewriting the broker's token file), which
// the operator's word puts ahead of the Agent's own renewals. With
// RenewToken, tok must be a JWT with sub and exp, and is renewed half-way
// through its life; otherwise Adopt refuses it and nothing changes.
func (a *Agent) Adopt(tok string) error {
	if a.cfg.RenewToken {
		sub, exp, ok := tokenClaims(tok)
		if !ok {
			return fmt.Errorf("%w: the credential to adopt is not a JWT with sub and exp", ErrInvalid)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.mu.subject, a.mu.renewAt = sub, halfway(time.Now(), exp)
	}
	a.token.Store(&tok)
	return nil
}

// halfway is the time half-way from now to exp.
func halfway(now, exp time.Time) time.Time { return now.Add(exp.Sub(now) / 2) }

// renew replaces the credential with a fresh one if it is due.
func (a *Agent) renew(ctx context.Context) {
	if !a.cfg.RenewToken {
		return
	}
	a.mu.Lock()
	sub, due := a.mu.subject, !time.Now().Before(a.mu.renewAt)
	a.mu.Unlock()
	if !due {
		return
	}
	used := a.token.Load()
	var resp NodeTokenResponse
	if err := a.api.Do(ctx, http.MethodPost, "/v1/token/node", NodeTokenRequest{Subject: sub}, &resp); err != nil {
		a.cfg.Logger.Warn("node credential renewal failed; retrying at the next keepalive", "member", a.cfg.Member.ID, "err", err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// A credential adopted while the request ran wins over the one it
	// returned, which was minted for the credential it replaced.
	if a.token.CompareAndSwap(used, &resp.Token) {
		a.mu.renewAt = halfway(time.Now(), resp.ExpiresAt)
	}
}

// LeaseTTL is the lease the control plane granted at the last
// registration.
func (a *Agent) LeaseTTL() time.Duration { return time.Duration(a.ttl.Load()) }

func (a *Agent) register(ctx context.Context) error {
	m := a.cfg.Member
	var resp RegisterResponse
	err := a.api.Do(ctx, http.MethodPost, "/v1/members", RegisterRequest{ID: m.ID, QUICAddr: m.QUICAddr, AdminAddr: m.AdminAddr, Zone: m.Zone}, &resp)
	if err != nil {
		return err
	}
	if resp.LeaseTTLMS <= 0 {
		return fmt.Errorf("controlplane/api: control plane granted a lease of %d ms", resp.LeaseTTLMS)
	}
	a.ttl.Store(int64(time.Duration(resp.LeaseTTLMS) * time.Millisecond))
	return nil
}

func (a *Agent) keepAlive(ctx context.Context) error {
	var body any
	if a.cfg.Load != nil || a.cfg.Replicas != nil {
		var req KeepAliveRequest
		if a.cfg.Load != nil {
			req.Load = a.cfg.Load()
			if req.Load == nil {
				req.Load = []cluster.ShardLoad{} // an empty report, not none
			}
		}
		if a.cfg.Replicas != nil {
			req.Replicas = a.cfg.Replicas()
			if req.Replicas == nil {
				req.Replicas = []cluster.ReplicaReport{}
			}
		}
		body = req
	}
	var resp KeepAliveResponse
	path := "/v1/members/" + url.PathEscape(a.cfg.Member.ID) + "/keepalive"
	err := a.api.Do(ctx, http.MethodPost, path, body, &resp)
	var refused *Error
	if req, ok := body.(KeepAliveRequest); ok && req.Replicas != nil && errors.As(err, &refused) && refused.Status == http.StatusBadRequest {
		// A report the control plane refuses must not cost the lease:
		// renew it without the report.
		a.cfg.Logger.Warn("replica report refused; keepalive sent without it", "member", a.cfg.Member.ID, "err", err)
		req.Replicas = nil
		err = a.api.Do(ctx, http.MethodPost, path, req, &resp)
	}
	return err
}

func (a *Agent) run(ctx context.Context) {
	defer close(a.done)
	delay := a.LeaseTTL() / 3
	backoff := a.cfg.RetryDelay
	var last time.Time
	for {
		if !a.wait(ctx, delay, last) {
			return
		}
		last = time.Now()
		a.renew(ctx)
		err := a.keepAlive(ctx)
		if errors.Is(err, ErrNotFound) {
			a.cfg.Logger.Warn("cluster lease lapsed; registering again", "member", a.cfg.Member.ID)
			err = a.register(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			a.cfg.Logger.Warn("cluster keepalive failed", "member", a.cfg.Member.ID, "err", err, "retry_in", backoff)
			delay, backoff = backoff, min(2*backoff, max(a.LeaseTTL()/3, a.cfg.RetryDelay))
		default:
			delay, backoff = a.LeaseTTL()/3, a.cfg.RetryDelay
		}
	}
}

// wait waits delay, or less when ReportNow fires (though not before
// RetryDelay since last); false when ctx ended.
func (a *Agent) wait(ctx context.Context, delay time.Duration, last time.Time) bool {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	now := a.cfg.ReportNow
	for {
		select {
		case <-timer.C:
			return true
		case <-ctx.Done():
			return false
		case <-now:
			now = nil // one early keepalive is enough
			if d := a.cfg.RetryDelay - time.Since(last); d < delay {
				timer.Reset(max(d, 0))
			}
		}
	}
}

// Close stops the keepalives and leaves the cluster (DELETE), so that the
// broker's ephemeral shards move at once instead of after the lease. A
// failed leave is returned; the lease then lapses by itself. Close is
// idempotent (later calls return nil).
func (a *Agent) Close() error {
	var err error
	a.once.Do(func() {
		a.stop()
		<-a.done
		var resp LeaveResponse
		err = a.api.Do(context.Background(), http.MethodDelete, "/v1/members/"+url.PathEscape(a.cfg.Member.ID), nil, &resp)
		if errors.Is(err, ErrNotFound) {
			err = nil // already gone
		}
	})
	return err
}
