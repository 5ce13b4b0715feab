package controlplane

import (
	"context"
	"net/http"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

// nodePerms is what a node credential of tenant grants.
func nodePerms(tenant string) []auth.Permission {
	return []auth.Permission{{Action: auth.ActionClusterNode, Resource: tenant + "/*/*"}}
}

// MintNode mints a node credential: a Felix token of tenant (the operator
// tenant) for subject granting auth.ActionClusterNode, valid for the
// configured token TTL like every Felix token, so that a key rotation's
// retirement horizon covers it.
func (t *Tokens) MintNode(ctx context.Context, tenant, subject string) (string, *auth.Claims, error) {
	if err := t.syncKeys(ctx, tenant); err != nil {
		return "", nil, err
	}
	return t.minter.Mint(tenant, subject, nodePerms(tenant))
}

// mintNode handles POST /v1/token/node.
func (s *Server) mintNode(w http.ResponseWriter, r *http.Request) error {
	// The subject, which a renewal's authorization compares, is in the
	// body; a body that does not give one is authorized on every subject
	// first, so that only an authorized caller learns what is wrong with it.
	if err := s.authenticate(r); err != nil {
		return err
	}
	var req api.NodeTokenRequest
	err := s.decodeBody(w, r, &req)
	if err == nil {
		err = ValidName("subject", req.Subject)
	}
	subject := req.Subject
	if err != nil {
		subject = "*"
	}
	if aerr := s.authorize(r, ActionNodeMint, "cluster:nodes/"+subject); aerr != nil {
		return aerr
	}
	if err != nil {
		return err
	}
	if s.cfg.OperatorTenant == "" {
		return apiErr(ErrNotFound, "no operator tenant is configured (FELIX_CP_OPERATOR_TENANT): node credentials belong to it")
	}
	tok, claims, err := s.tokens.MintNode(r.Context(), s.cfg.OperatorTenant, req.Subject)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.ExchangeResponse{Token: tok, ExpiresAt: claims.Expiry})
}
