package controlplane

import (
	"net/http"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

// JWKSMaxAge is the Cache-Control max-age of a tenant JWKS: brokers learn
// a rotation within it, and a token signed by an unknown kid makes them
// refresh sooner (rate-limited by their Fetcher).
const JWKSMaxAge = 60 * time.Second

// tokenError carries an HTTP status and a code chosen for an auth
// rejection; classify honours it.
type tokenError struct {
	status int
	code   string
	err    error
}

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// exchangeError maps an auth rejection onto a precise code: the client (or
// its operator) learns which check failed; a malformed token is
// "invalid_token" as in RFC 6750, every other code is auth.Reason's.
func exchangeError(err error) error {
	reason := auth.Reason(err)
	switch reason {
	case "":
		return err // a store error: classify maps it
	case "malformed":
		return &tokenError{http.StatusUnauthorized, "invalid_token", err}
	case "forbidden":
		return &tokenError{http.StatusForbidden, "forbidden", err}
	case "jwks_unavailable":
		return &tokenError{http.StatusServiceUnavailable, "jwks_unavailable", err}
	case "config":
		return &tokenError{http.StatusInternalServerError, "config", err}
	}
	return &tokenError{http.StatusUnauthorized, reason, err}
}

// exchange handles POST /v1/token/exchange. It needs no bearer token: the
// IdP token in the body is the credential.
func (s *Server) exchange(w http.ResponseWriter, r *http.Request) error {
	var req api.ExchangeRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if err := ValidName("tenant", req.Tenant); err != nil {
		return err
	}
	if req.IdPToken == "" {
		return invalid("idp_token is missing")
	}
	start := time.Now()
	tok, claims, err := s.tokens.Exchange(r.Context(), req.Tenant, req.IdPToken, req.Actions)
	if err != nil {
		err = exchangeError(err)
		_, code := classify(err)
		s.metrics.exchanges.WithLabelValues(code).Observe(time.Since(start).Seconds())
		return err
	}
	s.metrics.exchanges.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	return writeJSON(w, http.StatusOK, api.ExchangeResponse{Token: tok, ExpiresAt: claims.Expiry})
}

// jwks handles GET /v1/tenants/{tenant}/.well-known/jwks.json, public like
// any JWKS: brokers fetch it to verify Felix tokens locally.
func (s *Server) jwks(w http.ResponseWriter, r *http.Request) error {
	segs, err := pathSegments(r, KindTenant, 1)
	if err != nil {
		return err
	}
	doc, err := s.tokens.JWKS(r.Context(), segs[0])
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=60")
	_, err = w.Write(doc)
	return err
}

// rotate handles POST /v1/tenants/{tenant}/keys/rotate.
func (s *Server) rotate(w http.ResponseWriter, r *http.Request) error {
	segs, err := pathSegments(r, KindTenant, 1)
	if err != nil {
		return err
	}
	if err := s.authorize(r, ActionTenantKeys, resourceName(KindTenant, segs[0])); err != nil {
		return err
	}
	kid, err := s.tokens.Rotate(r.Context(), segs[0])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.RotateResponse{Tenant: segs[0], KeyID: kid})
}

// publicChanges drops the changes of kinds the API does not publish (the
// tenants' private keys); the etcd store skips them already.
func publicChanges(cs []Change) []Change {
	out := make([]Change, 0, len(cs))
	for _, c := range cs {
		if depth(c.Kind) > 0 {
			out = append(out, c)
		}
	}
	return out
}
