package controlplane

import (
	"net/http"

	"github.com/felixmq/felix/controlplane/api"
)

// ActionDevMint mints a token with chosen rights (POST /v1/token/mint).
const ActionDevMint = "token.mint"

// mintDev handles POST /v1/token/mint: the development issuer. It lets an
// operator try Felix, or run a local cluster, without an identity
// provider: the bootstrap token, which may already create tenants and so
// trust any IdP, mints a token of any tenant with the rights it names. It
// is authorized by Config.DevIssuer alone (never a Felix token), and is
// off unless that is set, which cmd/felix-controlplane does on the
// bootstrap listener only.
func (s *Server) mintDev(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.DevIssuer == nil {
		// Refused as any protected route first, so that only a caller
		// this listener authorizes learns whether the issuer exists.
		if err := s.authorize(r, ActionDevMint, "tenant:*"); err != nil {
			return err
		}
		return apiErr(ErrNotFound, "the development issuer is off on this listener "+
			"(it is served on the bootstrap listener, see FELIX_CP_DEV_ISSUER)")
	}
	if err := s.cfg.DevIssuer.Authorize(r, ActionDevMint, "tenant:*"); err != nil {
		return err
	}
	var req api.MintRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if err := ValidName("tenant", req.Tenant); err != nil {
		return err
	}
	if err := ValidName("subject", req.Subject); err != nil {
		return err
	}
	if len(req.Permissions) == 0 {
		return invalid("permissions is empty: name at least one {action, resource}")
	}
	for _, p := range req.Permissions {
		if err := p.Validate(req.Tenant); err != nil {
			return invalid("permission %s: %v", p, err)
		}
	}
	tok, claims, err := s.tokens.Mint(r.Context(), req.Tenant, req.Subject, req.Permissions)
	if err != nil {
		return err
	}
	s.cfg.Logger.Info("development issuer minted a token", "request_id", requestID(r), "tenant", req.Tenant,
		"subject", req.Subject, "permissions", len(req.Permissions), "expires_at", claims.Expiry)
	return writeJSON(w, http.StatusOK, api.ExchangeResponse{Token: tok, ExpiresAt: claims.Expiry})
}
