package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/knob"
	"github.com/felixmq/felix/internal/netaddr"
)

// The embedded control plane's tenant, namespace and dev token. The tenant
// and namespace are those of FELIX_STREAMS' and the CLI's defaults.
const (
	devTenant    = "t1"
	devNamespace = "default"
	devSubject   = "felix-dev"
	// devTokenTTL is the longest a Felix token may live; the token file is
	// rewritten with a fresh token every half of it.
	devTokenTTL = 24 * time.Hour
)

// embeddedCP is `make run`'s control plane: a controlplane.Server over a
// memory store, served on loopback inside the broker process. The broker
// follows it through cpSync exactly as it follows an external control plane
// (FELIX_CONTROLPLANE_URL), so the token verification and stream sync of
// `make run` are the production ones. It creates tenant t1 with namespace
// default, mints a Felix token with admin on t1/*/* through the control
// plane's own Tokens, and writes the token (mode 0600) and its URL into
// FELIX_DEV_DIR for the CLI and felix-loadgen. t1 is its operator tenant,
// so that token also creates tenants with `felix admin`. The broker reads
// the feed with a random bootstrap token that never leaves the process.
type embeddedCP struct {
	dataDir   string // FELIX_DATA_DIR: without one, durable streams and caches are refused at creation
	url       string
	feedToken string
	token     string // the dev token, written into the dev directory by publish
	dev       *devdir.Claim
	log       *slog.Logger
	server    *controlplane.Server
	http      *http.Server
	cp        *api.Client // the server's own API, with feedToken
	store     controlplane.Store
	tokens    *controlplane.Tokens
	stop      chan struct{} // ends the token refresher
	done      chan struct{} // closed when the refresher has returned
	served    chan struct{} // closed when http.Serve has returned
}

func checkEmbeddedBind(s string) error {
	if s == "off" {
		return nil
	}
	if err := knob.CheckHostPort(s); err != nil {
		return err
	}
	if !netaddr.Loopback(s) {
		return errors.New("not a loopback address (the embedded control plane is for make run)")
	}
	return nil
}

// startEmbeddedCP starts the embedded control plane, or returns nil when
// it does not apply: FELIX_CONTROLPLANE_URL is set, the knob is off, or
// the broker listens beyond loopback (where it must be given a real
// control plane, and refuses to start without one).
func startEmbeddedCP(vals *knob.Values, log *slog.Logger) (*embeddedCP, error) {
	bind := knobEmbeddedCP.Get(vals)
	switch {
	case knobControlPlane.Get(vals) != "", bind == "off":
		return nil, nil
	case !netaddr.Loopback(knobQUICBind.Get(vals)) || !netaddr.Loopback(knobAdminBind.Get(vals)):
		log.Info("embedded control plane not started: the broker listens beyond loopback")
		return nil, nil
	}
	e := &embeddedCP{dataDir: knobDataDir.Get(vals), feedToken: rand.Text(), log: log, stop: make(chan struct{}), done: make(chan struct{})}
	if err := e.open(bind); err != nil {
		e.closeServer()
		return nil, err
	}
	var err error
	if e.token, err = e.setUp(); err != nil {
		e.closeServer()
		return nil, err
	}
	log.Info("embedded control plane", "url", e.url, "tenant", devTenant)
	return e, nil
}

// publish writes the dev token (0600) and the URL into the claimed dev
// directory, once the broker serves, and keeps the token fresh there.
func (e *embeddedCP) publish(dev *devdir.Claim) error {
	if err := dev.WriteFile(devdir.TokenFile, e.token+"\n", 0o600); err != nil {
		return fmt.Errorf("%w: FELIX_DEV_DIR: %v", errConfig, err)
	}
	if err := dev.WriteFile(devdir.ControlPlaneURLFile, e.url+"\n", 0o644); err != nil {
		return fmt.Errorf("%w: FELIX_DEV_DIR: %v", errConfig, err)
	}
	e.dev = dev
	go pprof.Do(context.Background(), pprof.Labels("goroutine", "felix-embedded-cp-token"), func(context.Context) { e.refresh() })
	e.log.Info("embedded control plane: dev token written", "token_file", filepath.Join(dev.Dir(), devdir.TokenFile),
		"url_file", filepath.Join(dev.Dir(), devdir.ControlPlaneURLFile))
	return nil
}

// open builds the control plane and serves it on bind.
func (e *embeddedCP) open(bind string) error {
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	if err != nil {
		return err
	}
	e.store = st
	if e.tokens, err = controlplane.NewTokens(st, controlplane.TokensConfig{Minter: auth.MinterConfig{TTL: devTokenTTL}}); err != nil {
		return err
	}
	felix, err := controlplane.NewFelixTokenAuthorizer(controlplane.FelixTokenConfig{Keys: e.tokens, OperatorTenant: devTenant})
	if err != nil {
		return err
	}
	boot, err := controlplane.NewBootstrapAuthorizer(e.feedToken)
	if err != nil {
		return err
	}
	if e.server, err = controlplane.New(controlplane.Config{Store: st, Authorizer: controlplane.AnyOf{boot, felix},
		Tokens: e.tokens, Logger: e.log, CheckStream: func(s api.Stream) error { return e.servable(s.Durable) },
		CheckCache: func(c api.Cache) error { return e.servable(c.Durable) }}); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return fmt.Errorf("%w: FELIX_EMBEDDED_CONTROLPLANE_BIND: %v", errConfig, err)
	}
	e.url = "http://" + ln.Addr().String()
	if e.cp, err = api.NewClient(api.ClientConfig{URL: e.url, Token: func() string { return e.feedToken }}); err != nil {
		ln.Close()
		return err
	}
	e.http = &http.Server{Handler: e.server, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelWarn)}
	e.served = make(chan struct{})
	go func() {
		defer close(e.served)
		e.http.Serve(ln) // returns ErrServerClosed after Close
	}()
	return nil
}

// servable refuses, at creation, what the broker could not serve: its
// control plane serves it alone.
func (e *embeddedCP) servable(durable bool) error {
	if durable && e.dataDir == "" {
		return errors.New("this broker has no data directory (FELIX_DATA_DIR), so it cannot keep durable streams or caches; restart it with one")
	}
	return nil
}

// CreateStream is broker.Catalog: the broker's POST /v1/streams creates
// the stream here, and serves it from the feed like any other.
func (e *embeddedCP) CreateStream(ctx context.Context, s broker.StreamSpec) error {
	return catalogErr(e.cp.Do(ctx, http.MethodPost, "/v1/tenants/"+s.Tenant+"/namespaces/"+s.Namespace+"/streams",
		api.Stream{Stream: s.Stream, Shards: s.Shards, Durable: s.Durable, Fsync: s.Fsync, Routing: s.Routing}, nil), broker.ErrStreamExists)
}

// CreateCache is broker.Catalog for caches.
func (e *embeddedCP) CreateCache(ctx context.Context, c broker.CacheSpec) error {
	return catalogErr(e.cp.Do(ctx, http.MethodPost, "/v1/tenants/"+c.Tenant+"/namespaces/"+c.Namespace+"/caches",
		api.Cache{Cache: c.Cache, Durable: c.Durable, Fsync: c.Fsync, MaxEntries: int64(c.MaxEntries), MaxBytes: c.MaxBytes}, nil), broker.ErrCacheExists)
}

// catalogErr maps the control plane's conflict onto the broker's exists.
func catalogErr(err, exists error) error {
	if errors.Is(err, api.ErrConflict) {
		return fmt.Errorf("%w (%v)", exists, err)
	}
	return err
}

// elsewhere is the broker.Catalog of a broker following an external
// control plane: streams are created there.
type elsewhere struct{ url string }

func (c elsewhere) refuse(kind string) error {
	return fmt.Errorf("%w at %s: create the %s there (felix admin %s create NAME --controlplane %s)",
		broker.ErrCatalogElsewhere, c.url, kind, kind, c.url)
}

func (c elsewhere) CreateStream(context.Context, broker.StreamSpec) error { return c.refuse("stream") }
func (c elsewhere) CreateCache(context.Context, broker.CacheSpec) error   { return c.refuse("cache") }

// setUp creates the dev tenant and namespace through the API and mints
// the dev token.
func (e *embeddedCP) setUp() (string, error) {
	for _, c := range []struct{ path, body string }{
		{"/v1/tenants", `{"tenant":"` + devTenant + `"}`},
		{"/v1/tenants/" + devTenant + "/namespaces", `{"tenant":"` + devTenant + `","namespace":"` + devNamespace + `"}`},
	} {
		if err := e.post(c.path, c.body); err != nil {
			return "", fmt.Errorf("embedded control plane: %w", err)
		}
	}
	return e.mint()
}

func (e *embeddedCP) mint() (string, error) {
	tok, _, err := e.tokens.Mint(context.Background(), devTenant, devSubject,
		[]auth.Permission{{Action: auth.ActionAdmin, Resource: devTenant + "/*/*"}})
	return tok, err
}

// register creates the start-up streams and caches (FELIX_STREAMS,
// FELIX_CACHES) in the embedded control plane, with their tenants and
// namespaces, so that they are in its catalog (`felix admin stream list`
// shows them) and reach the broker through the feed like any other.
// Existing ones are left as they are.
func (e *embeddedCP) register(streams []broker.StreamSpec, caches []broker.CacheSpec) error {
	var reqs [][2]string // path, body
	// Tenant and namespace pairs already requested; setUp made the dev one.
	scoped := map[[2]string]bool{{devTenant, devNamespace}: true}
	scope := func(tenant, ns string) string {
		if !scoped[[2]string{tenant, ns}] {
			scoped[[2]string{tenant, ns}] = true
			reqs = append(reqs,
				[2]string{"/v1/tenants", jsonBody(map[string]any{"tenant": tenant})},
				[2]string{"/v1/tenants/" + tenant + "/namespaces", jsonBody(map[string]any{"tenant": tenant, "namespace": ns})})
		}
		return "/v1/tenants/" + tenant + "/namespaces/" + ns
	}
	for _, s := range streams {
		p := scope(s.Tenant, s.Namespace) + "/streams"
		reqs = append(reqs, [2]string{p, jsonBody(api.Stream{Tenant: s.Tenant, Namespace: s.Namespace, Stream: s.Stream,
			Shards: s.Shards, Durable: s.Durable, Fsync: s.Fsync, Routing: s.Routing})})
	}
	for _, c := range caches {
		p := scope(c.Tenant, c.Namespace) + "/caches"
		reqs = append(reqs, [2]string{p, jsonBody(api.Cache{Tenant: c.Tenant, Namespace: c.Namespace, Cache: c.Cache,
			Durable: c.Durable, Fsync: c.Fsync, MaxEntries: int64(c.MaxEntries), MaxBytes: c.MaxBytes})})
	}
	for _, r := range reqs {
		// What FELIX_STREAMS and FELIX_CACHES name is refused only when
		// they are wrong: a configuration error.
		if err := e.post(r[0], r[1]); err != nil && !errors.Is(err, api.ErrConflict) {
			return fmt.Errorf("%w: FELIX_STREAMS / FELIX_CACHES: embedded control plane: %v", errConfig, err)
		}
	}
	return nil
}

func jsonBody(v any) string {
	b, _ := json.Marshal(v) // maps and model structs always marshal
	return string(b)
}

// post creates a resource; one that exists already is refused with an
// error matching api.ErrConflict.
func (e *embeddedCP) post(path, body string) error {
	return e.cp.Do(context.Background(), http.MethodPost, path, json.RawMessage(body), nil)
}

// refresh rewrites the token file with a fresh token every half of its
// lifetime, so a broker left running keeps a usable dev token.
func (e *embeddedCP) refresh() {
	defer close(e.done)
	t := time.NewTicker(devTokenTTL / 2)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		tok, err := e.mint()
		if err == nil {
			err = e.dev.WriteFile(devdir.TokenFile, tok+"\n", 0o600)
		}
		if err != nil {
			e.log.Warn("embedded control plane: could not refresh the dev token", "err", err)
		}
	}
}

// Close stops the refresher and the server (ending the broker's pending
// long-poll) and closes the store. The token and URL files stay: the next
// start overwrites them.
func (e *embeddedCP) Close() {
	close(e.stop)
	if e.dev != nil {
		<-e.done
	}
	e.closeServer()
}

func (e *embeddedCP) closeServer() {
	if e.server != nil {
		e.server.Close()
	}
	if e.http != nil {
		e.http.Close()
		<-e.served
	}
	if e.store != nil {
		e.store.Close()
	}
}
