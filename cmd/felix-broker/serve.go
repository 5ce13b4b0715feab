package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/internal/knob"
)

// errConfig marks failures that a deployment change fixes (a bind that cannot
// be had, for instance); they exit with status 2 like bad knob values.
var errConfig = errors.New("felix-broker: configuration")

// serve holds the QUIC port and runs the admin endpoints until ctx ends. The
// data path arrives with the broker package; until then the broker validates
// its knobs, binds its listeners and reports ready.
func serve(ctx context.Context, vals *knob.Values, log *slog.Logger) error {
	udp, err := net.ListenPacket("udp", knobQUICBind.Get(vals))
	if err != nil {
		return fmt.Errorf("%w: FELIX_QUIC_BIND: %v", errConfig, err)
	}
	defer udp.Close()
	ln, err := net.Listen("tcp", knobAdminBind.Get(vals))
	if err != nil {
		return fmt.Errorf("%w: FELIX_ADMIN_BIND: %v", errConfig, err)
	}
	var ready atomic.Bool
	srv := &http.Server{Handler: adminMux(&ready), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	ready.Store(true)
	log.Info("felix-broker ready", "quic", udp.LocalAddr().String(), "admin", ln.Addr().String())
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("admin server: %w", err)
	}
	ready.Store(false)
	log.Info("shutting down", "drain_budget", knobShutdownDrain.Get(vals))
	sctx, cancel := context.WithTimeout(context.Background(), knobShutdownDrain.Get(vals))
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("admin shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func adminMux(ready *atomic.Bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
