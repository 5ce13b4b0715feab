package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/knob"
)

// cpSync keeps the broker's streams and caches in step with the control
// plane: a snapshot, then a long-poll of the changes feed (so a stream
// created there is served here within a long-poll round trip), again from
// a snapshot whenever the feed answers "resync". It also knows which
// tenants exist, so the token verifier fetches keys only for real tenants.
type cpSync struct {
	cp   *api.Client // reads the feed with cred
	cred *credential
	b    *broker.Broker
	log  *slog.Logger
	// verifier checks Felix tokens with the tenant keys the control plane
	// publishes; cluster mode verifies node credentials with it.
	verifier *auth.Verifier

	mu      sync.Mutex
	tenants map[string]bool
}

// cpRequestTimeout bounds a snapshot read, and a long-poll of the feed on
// top of its cpFeedWait.
const (
	cpRequestTimeout = 30 * time.Second
	cpFeedWait       = 30 * time.Second
)

func newCPSync(base string, cred *credential, log *slog.Logger) (*cpSync, error) {
	cp, err := api.NewClient(api.ClientConfig{URL: base, Token: cred.Token, RequestTimeout: cpRequestTimeout})
	if err != nil {
		return nil, fmt.Errorf("%w: FELIX_CONTROLPLANE_URL: %v", errConfig, err)
	}
	return &cpSync{cp: cp, cred: cred, log: log, tenants: map[string]bool{}}, nil
}

// tokenClockSkew is tolerated past a Felix token's exp: the broker's and
// the control plane's clocks are both ours (NTP), unlike an IdP's.
const tokenClockSkew = 5 * time.Second

// cpSyncTimeout bounds waiting for the first snapshot at start-up: a broker
// that cannot reach its control plane says so instead of serving nothing.
const cpSyncTimeout = 15 * time.Second

// start follows the control plane for b until ctx ends, after the first
// snapshot has been applied.
func (s *cpSync) start(ctx context.Context, b *broker.Broker) error {
	s.b = b
	synced := make(chan struct{})
	go s.run(ctx, synced)
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cpSyncTimeout):
		return fmt.Errorf("%w: FELIX_CONTROLPLANE_URL %s: no snapshot within %v", errConfig, s.cp.URL(), cpSyncTimeout)
	}
}

// controlPlaneAuth configures token verification against the control
// plane when FELIX_CONTROLPLANE_URL is set: Felix tokens are checked
// locally with the tenant keys the control plane publishes (fetched and
// cached per tenant, refreshed on rotation), and the broker's streams and
// caches follow the control plane. Without it serve starts the embedded
// control plane, or with that off the dev verifier stays, which broker.New
// allows on loopback only.
func controlPlaneAuth(vals *knob.Values, cfg *broker.Config, log *slog.Logger) (*cpSync, error) {
	base := knobControlPlane.Get(vals)
	if base == "" {
		return nil, nil
	}
	cred := fixedCredential("")
	name, f := "FELIX_CONTROLPLANE_TOKEN_FILE", knobControlPlaneToken.Get(vals)
	if f == "" {
		name, f = "FELIX_NODE_TOKEN_FILE", knobNodeToken.Get(vals) // a node credential reads the feed too
	}
	if f != "" {
		var err error
		if cred, err = fileCredential(name, f); err != nil {
			return nil, err
		}
	}
	return followControlPlane(base, cred, cfg, log)
}

// followControlPlane is controlPlaneAuth for the control plane at base,
// reading its feed with token; the embedded control plane uses it too.
func followControlPlane(base string, cred *credential, cfg *broker.Config, log *slog.Logger) (*cpSync, error) {
	s, err := newCPSync(base, cred, log)
	if err != nil {
		return nil, err
	}
	// The control plane is ours: refetch soon after an unknown kid (a
	// rotation) rather than after the default 30 s meant for IdPs.
	fetcher, err := auth.NewFetcher(auth.FetcherConfig{MinRefreshInterval: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	v, err := auth.NewVerifier(auth.VerifierConfig{Keys: auth.JWKSKeySource{Fetcher: fetcher, URL: s.jwksURL},
		ClockSkew: tokenClockSkew})
	if err != nil {
		return nil, err
	}
	cfg.Verifier = broker.TokenVerifier{V: v, ClockSkew: tokenClockSkew}
	s.verifier = v
	return s, nil
}

// nodeVerifier accepts a node credential on a forwarded stream: a Felix
// token of the operator tenant, verified with that tenant's keys, granting
// cluster.node itself. Another tenant's token fails verification for the
// operator tenant; an admin grant is not a node credential, so neither a
// tenant's admin nor the operator's own admin tokens open forwarded
// streams.
func nodeVerifier(v *auth.Verifier, operator string) func(ctx context.Context, token string) (broker.NodeCredential, error) {
	return func(ctx context.Context, token string) (broker.NodeCredential, error) {
		c, err := v.Verify(ctx, operator, token)
		if err != nil {
			return broker.NodeCredential{}, fmt.Errorf("%s: %w", auth.Reason(err), err)
		}
		if !slices.ContainsFunc(c.Perms, func(p auth.Permission) bool { return p.Action == auth.ActionClusterNode }) {
			return broker.NodeCredential{}, fmt.Errorf("token of %q grants no %s", c.Subject, auth.ActionClusterNode)
		}
		if err := auth.Check(c, auth.ActionClusterNode, operator+"/cluster/node"); err != nil {
			return broker.NodeCredential{}, err
		}
		return broker.NodeCredential{Subject: c.Subject, Expiry: c.Expiry.Add(tokenClockSkew)}, nil
	}
}

// tokenTenant reads a JWT's tid claim without verifying it: it only picks
// whose keys verify the token; the signature decides.
func tokenTenant(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var c struct {
		Tenant string `json:"tid"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Tenant == "" {
		return "", errors.New("no tid claim")
	}
	return c.Tenant, nil
}

// jwksURL is the auth.JWKSKeySource URL of tenant: "" for a tenant the
// control plane does not have, so a client-chosen tenant name never
// becomes a fetch.
func (s *cpSync) jwksURL(tenant string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.tenants[tenant] {
		return ""
	}
	return s.cp.URL() + "/v1/tenants/" + url.PathEscape(tenant) + "/.well-known/jwks.json"
}

// run follows the control plane until ctx ends, retrying with backoff.
func (s *cpSync) run(ctx context.Context, synced chan<- struct{}) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		rev, err := s.loadSnapshot(ctx)
		if err == nil {
			if synced != nil {
				close(synced)
				synced = nil
			}
			backoff = 100 * time.Millisecond
			err = s.follow(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("control plane sync: retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *cpSync) loadSnapshot(ctx context.Context) (int64, error) {
	var snap api.Snapshot
	if err := s.cp.Do(ctx, http.MethodGet, "/v1/snapshot", nil, &snap); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.tenants = map[string]bool{}
	for _, t := range snap.Tenants {
		s.tenants[t.Tenant] = true
	}
	s.mu.Unlock()
	for _, st := range snap.Streams {
		s.applyStream(st)
	}
	for _, c := range snap.Caches {
		s.applyCache(c)
	}
	return snap.Revision, nil
}

func (s *cpSync) follow(ctx context.Context, cursor int64) error {
	for ctx.Err() == nil {
		// A 410 (api.ErrResync: the feed no longer holds the cursor) ends
		// this and run starts again from a snapshot.
		var page api.ChangesPage
		path := fmt.Sprintf("/v1/changes?cursor=%d&wait=%s", cursor, cpFeedWait)
		if err := s.cp.Poll(ctx, path, cpFeedWait, &page); err != nil {
			return err
		}
		for _, ch := range page.Changes {
			s.apply(ch)
		}
		cursor = page.NextCursor
	}
	return ctx.Err()
}

func (s *cpSync) apply(ch api.Change) {
	if ch.Op != api.OpCreated {
		s.applyDeletion(ch.Ref)
		return
	}
	var err error
	switch ch.Kind {
	case api.KindTenant:
		var t api.Tenant
		if err = json.Unmarshal(ch.Object, &t); err == nil {
			s.mu.Lock()
			s.tenants[t.Tenant] = true
			s.mu.Unlock()
		}
	case api.KindStream:
		var st api.Stream
		if err = json.Unmarshal(ch.Object, &st); err == nil {
			s.applyStream(st)
		}
	case api.KindCache:
		var c api.Cache
		if err = json.Unmarshal(ch.Object, &c); err == nil {
			s.applyCache(c)
		}
	}
	if err != nil {
		s.log.Error("control plane: bad change", "kind", ch.Kind, "key", ch.Path, "err", err)
	}
}

// applyDeletion removes what the control plane deleted: a stream or cache
// ends its subscribers and leaves the data directory at once; a tenant's
// keys are no longer fetched. (A snapshot after a resync only creates: a
// deletion missed while the feed was unreachable stays until restart.)
func (s *cpSync) applyDeletion(ref api.Ref) {
	var err error
	parts := strings.Split(ref.Path, "/")
	switch {
	case ref.Kind == api.KindTenant:
		s.mu.Lock()
		delete(s.tenants, ref.Path)
		s.mu.Unlock()
	case ref.Kind == api.KindStream && len(parts) == 3:
		err = s.b.DeleteStream(broker.StreamKey{Tenant: parts[0], Namespace: parts[1], Stream: parts[2]})
		if errors.Is(err, broker.ErrStreamNotFound) {
			err = nil
		}
	case ref.Kind == api.KindCache && len(parts) == 3:
		err = s.b.DeleteCache(broker.CacheKey{Tenant: parts[0], Namespace: parts[1], Cache: parts[2]})
		if errors.Is(err, broker.ErrCacheNotFound) {
			err = nil
		}
	}
	if err != nil {
		s.log.Error("control plane: cannot apply deletion", "kind", ref.Kind, "key", ref.Path, "err", err)
	}
}

func (s *cpSync) applyStream(st api.Stream) {
	spec := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: st.Tenant, Namespace: st.Namespace, Stream: st.Stream},
		Shards: st.Shards, Durable: st.Durable, Fsync: st.Fsync, Routing: st.Routing}
	if st.ReplicationFactor() > 1 {
		spec.Replicas, spec.Ack = st.ReplicationFactor(), st.AckMode()
	}
	if err := s.b.CreateStream(spec); err != nil && !errors.Is(err, broker.ErrStreamExists) {
		s.log.Error("control plane: cannot serve stream", "stream", spec.StreamKey, "err", err)
	}
}

func (s *cpSync) applyCache(c api.Cache) {
	spec := broker.CacheSpec{CacheKey: broker.CacheKey{Tenant: c.Tenant, Namespace: c.Namespace, Cache: c.Cache},
		Durable: c.Durable, Fsync: c.Fsync, MaxEntries: int(c.MaxEntries), MaxBytes: c.MaxBytes}
	if err := s.b.CreateCache(spec); err != nil && !errors.Is(err, broker.ErrCacheExists) {
		s.log.Error("control plane: cannot serve cache", "cache", spec.CacheKey, "err", err)
	}
}
