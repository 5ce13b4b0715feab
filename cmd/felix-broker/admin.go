package main

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/internal/knob"
	"github.com/felixmq/felix/internal/netaddr"
)

// adminAuth sets cfg.AdminAuth from the FELIX_ADMIN_* knobs. With no
// credential configured the admin API is local-only: it serves anyone on
// its loopback listener, and a bind beyond loopback is refused. With one,
// every endpoint but /live and /ready needs a bearer token: the one in
// FELIX_ADMIN_TOKEN_FILE, or a Felix token of FELIX_ADMIN_TENANT granting
// admin on the whole tenant; a bind beyond loopback also needs
// FELIX_ADMIN_REMOTE. cfg.Verifier must be set already.
func adminAuth(vals *knob.Values, cfg *broker.Config, log *slog.Logger) error {
	bind, tenant := knobAdminBind.Get(vals), knobAdminTenant.Get(vals)
	var secret *credential
	if f := knobAdminToken.Get(vals); f != "" {
		var err error
		if secret, err = fileCredential("FELIX_ADMIN_TOKEN_FILE", f); err != nil {
			return err
		}
	}
	if secret == nil && tenant == "" {
		if !netaddr.Loopback(bind) {
			return fmt.Errorf("%w: FELIX_ADMIN_BIND %s is not loopback: the admin API (streams, caches, metrics, pprof) "+
				"beyond loopback needs a credential (FELIX_ADMIN_TOKEN_FILE or FELIX_ADMIN_TENANT) and FELIX_ADMIN_REMOTE=true", errConfig, bind)
		}
		log.Info("admin API: local-only, without authentication", "bind", bind)
		return nil
	}
	if !netaddr.Loopback(bind) && !knobAdminRemote.Get(vals) {
		return fmt.Errorf("%w: FELIX_ADMIN_BIND %s is not loopback: set FELIX_ADMIN_REMOTE=true to serve the admin API beyond it", errConfig, bind)
	}
	if tenant != "" && cfg.Verifier == nil {
		return fmt.Errorf("%w: FELIX_ADMIN_TENANT needs Felix token verification (a control plane, embedded or FELIX_CONTROLPLANE_URL)", errConfig)
	}
	verifier := cfg.Verifier
	cfg.AdminAuth = func(r *http.Request) error {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case !ok || tok == "":
			return &broker.AdminAuthError{Status: http.StatusUnauthorized, Reason: "bearer token required"}
		case secret != nil && subtle.ConstantTimeCompare([]byte(tok), []byte(secret.Token())) == 1:
			return nil
		case tenant == "":
			return &broker.AdminAuthError{Status: http.StatusUnauthorized, Reason: "unknown token"}
		}
		p, err := verifier.Verify(r.Context(), tenant, tok)
		if err != nil {
			return &broker.AdminAuthError{Status: http.StatusUnauthorized, Reason: err.Error()}
		}
		if err := p.Check(auth.ActionAdmin, tenant+"/*/*"); err != nil {
			return &broker.AdminAuthError{Status: http.StatusForbidden, Reason: err.Error()}
		}
		return nil
	}
	log.Info("admin API: bearer token required", "bind", bind, "token_file", knobAdminToken.Get(vals), "admin_tenant", tenant)
	return nil
}
