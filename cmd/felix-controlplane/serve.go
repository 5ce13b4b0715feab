package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/internal/knob"
	"github.com/felixmq/felix/internal/netaddr"
)

// errConfig marks failures that a deployment change fixes; they exit 2.
var errConfig = errors.New("felix-controlplane: configuration")

// listener is one HTTP server of the control plane.
type listener struct {
	name string
	api  *controlplane.Server
	http *http.Server
	ln   net.Listener
}

// serve runs the control plane until ctx ends, then shuts down gracefully:
// pending long-polls answer at once, in-flight requests get the drain
// budget, then the store closes.
func serve(ctx context.Context, vals *knob.Values, log *slog.Logger) error {
	boot, err := bootstrapAuthorizer(vals, log)
	if err != nil {
		return err
	}
	bind := knobBind.Get(vals)
	if boot == nil && !netaddr.Loopback(bind) {
		return fmt.Errorf("%w: FELIX_CP_BIND=%s is not a loopback address and FELIX_CP_BOOTSTRAP_TOKEN_FILE is not set: "+
			"refusing to expose the control plane without authentication configured", errConfig, bind)
	}
	store, err := openStore(ctx, vals)
	if err != nil {
		return err
	}
	defer store.Close()

	// One token service for both listeners: they mint and verify with the
	// same keys. The main listener admits Felix tokens only; the bootstrap
	// listener also the bootstrap token.
	tokens, err := controlplane.NewTokens(store, controlplane.TokensConfig{
		Minter: auth.MinterConfig{TTL: knobTokenTTL.Get(vals)}})
	if err != nil {
		return err
	}
	felix, err := controlplane.NewFelixTokenAuthorizer(controlplane.FelixTokenConfig{
		Keys: tokens, OperatorTenant: knobOperatorTenant.Get(vals)})
	if err != nil {
		return err
	}
	// One placer for both listeners: one goroutine recomputes, and both
	// serve its long-polls.
	placer, err := controlplane.NewPlacer(store, placerConfig(vals, log))
	if err != nil {
		return err
	}
	defer placer.Close()
	lns := []*listener{}
	defer func() {
		for _, l := range lns {
			l.api.Close()
			l.ln.Close()
		}
	}()
	shared := controlplane.Config{Store: store, Tokens: tokens, Placer: placer, OperatorTenant: knobOperatorTenant.Get(vals),
		Logger: log, MaxWait: knobMaxWait.Get(vals), Metrics: controlplane.NewMetrics()}
	apiCfg := shared
	apiCfg.Authorizer = felix
	api, err := newListener("api", bind, apiCfg)
	if err != nil {
		return err
	}
	lns = append(lns, api)
	if boot != nil {
		bootCfg := shared
		bootCfg.Authorizer = controlplane.AnyOf{boot, felix}
		if devIssuer(vals) {
			bootCfg.DevIssuer = boot
		}
		bl, err := newListener("bootstrap", knobBootstrapBind.Get(vals), bootCfg)
		if err != nil {
			return err
		}
		lns = append(lns, bl)
	}
	errc := make(chan error, len(lns))
	for _, l := range lns {
		go func() { errc <- l.http.Serve(l.ln) }()
	}
	attrs := []any{"api", api.ln.Addr().String(), "store", knobStore.Get(vals)}
	if boot != nil {
		attrs = append(attrs, "bootstrap", lns[1].ln.Addr().String(), "dev_issuer", devIssuer(vals))
	}
	log.Info("felix-controlplane ready", attrs...)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	}
	return shutdown(lns, knobShutdownDrain.Get(vals), log)
}

func newListener(name, addr string, cfg controlplane.Config) (*listener, error) {
	api, err := controlplane.New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		api.Close()
		return nil, fmt.Errorf("%w: %s listener on %s: %v", errConfig, name, addr, err)
	}
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	return &listener{name: name, api: api, http: hs, ln: ln}, nil
}

func shutdown(lns []*listener, drain time.Duration, log *slog.Logger) error {
	log.Info("shutting down", "drain", drain)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var errs []error
	for _, l := range lns {
		l.api.Close() // ends long-polls so Shutdown does not wait them out
		if err := l.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s listener: %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}

// devIssuer says whether the bootstrap listener serves the development
// issuer.
func devIssuer(vals *knob.Values) bool {
	switch knobDevIssuer.Get(vals) {
	case "on":
		return true
	case "loopback":
		return netaddr.Loopback(knobBootstrapBind.Get(vals))
	}
	return false
}

// bootstrapAuthorizer reads the token file, or returns nil without one.
func bootstrapAuthorizer(vals *knob.Values, log *slog.Logger) (controlplane.Authorizer, error) {
	path := knobBootstrapTokenFile.Get(vals)
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: FELIX_CP_BOOTSTRAP_TOKEN_FILE: %v", errConfig, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("bootstrap token file is readable by other users; chmod 600 it", "file", path, "mode", fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: FELIX_CP_BOOTSTRAP_TOKEN_FILE: %v", errConfig, err)
	}
	a, err := controlplane.NewBootstrapAuthorizer(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: FELIX_CP_BOOTSTRAP_TOKEN_FILE %s: %v", errConfig, path, err)
	}
	return a, nil
}

// openStore opens the configured store; an etcd store is probed once so a
// wrong endpoint fails at start-up, not on the first request.
func openStore(ctx context.Context, vals *knob.Values) (controlplane.Store, error) {
	if knobStore.Get(vals) == "memory" {
		return controlplane.NewMemoryStore(controlplane.MemoryConfig{History: int(knobHistory.Get(vals))})
	}
	eps := splitList(knobEtcdEndpoints.Get(vals))
	if len(eps) == 0 {
		return nil, fmt.Errorf("%w: FELIX_CP_STORE=etcd needs FELIX_CP_ETCD_ENDPOINTS", errConfig)
	}
	st, err := controlplane.NewEtcdStore(controlplane.EtcdConfig{Endpoints: eps, Prefix: knobEtcdPrefix.Get(vals),
		Timeout: knobEtcdTimeout.Get(vals)})
	if err != nil {
		return nil, err
	}
	if _, _, err := st.List(ctx, controlplane.KindTenant, ""); err != nil {
		st.Close()
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(eps, ","), err)
	}
	return st, nil
}
