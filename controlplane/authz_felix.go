package controlplane

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/felixmq/felix/auth"
)

// FelixTokenConfig configures a FelixTokenAuthorizer.
type FelixTokenConfig struct {
	// Keys are the tenants' public keys: the control plane's own Tokens.
	Keys auth.KeySource
	// OperatorTenant, if set, is the tenant whose admins run the whole
	// control plane: they create and delete tenants, list them, and read
	// the changes feed. Empty leaves those to the bootstrap token.
	OperatorTenant string
	// Issuer, Audience and ClockSkew as the Minter's (auth defaults).
	Issuer, Audience string
	ClockSkew        time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// FelixTokenAuthorizer admits requests carrying a Felix token (the result
// of the token exchange) as "Authorization: Bearer <token>" whose
// permissions grant the action (see needs). It verifies locally against
// the control plane's own keys.
type FelixTokenAuthorizer struct {
	v        *auth.Verifier
	operator string
}

// NewFelixTokenAuthorizer returns the authorizer.
func NewFelixTokenAuthorizer(cfg FelixTokenConfig) (*FelixTokenAuthorizer, error) {
	v, err := auth.NewVerifier(auth.VerifierConfig{Keys: cfg.Keys, Issuer: cfg.Issuer, Audience: cfg.Audience, ClockSkew: cfg.ClockSkew, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	return &FelixTokenAuthorizer{v: v, operator: cfg.OperatorTenant}, nil
}

// need is one way to be allowed: a token of tenant that passes
// auth.Check(action, resource); an empty action only asks for a valid
// token of the tenant.
type need struct {
	tenant   string
	action   auth.Action
	resource string
	subject  string // if set, the token's sub must be it
}

// needs maps an API action on a resource ("kind:path") onto the Felix
// permissions that allow it, any one sufficing. Managing tenants and
// reading the cluster-wide feed is the operator's; inside a tenant, its
// admin may do everything, the *.manage permissions manage their kind, and
// any valid token of the tenant may read its resources (the data path's
// permissions already imply knowing they exist). A node credential may read
// the feed too.
func (a *FelixTokenAuthorizer) needs(action, resource string) []need {
	var out []need
	_, path, _ := strings.Cut(resource, ":")
	seg := strings.Split(path, "/")
	tenant := seg[0]
	for len(seg) < 3 {
		seg = append(seg, "*")
	}
	within := strings.Join(seg, "/")
	if tenant != "*" {
		admin := need{tenant: tenant, action: auth.ActionAdmin, resource: tenant + "/*/*"}
		switch action {
		case ActionTenantView, ActionTenantKeys:
			out = append(out, admin)
		case ActionNamespaceManage:
			out = append(out, need{tenant: tenant, action: auth.ActionNamespace, resource: within})
		case ActionStreamManage:
			out = append(out, need{tenant: tenant, action: auth.ActionStreamAdmin, resource: within})
		case ActionCacheManage:
			out = append(out, need{tenant: tenant, action: auth.ActionCacheAdmin, resource: within})
		case ActionNamespaceView, ActionStreamView, ActionCacheView:
			out = append(out, need{tenant: tenant})
		}
	}
	if a.operator != "" {
		out = append(out, need{tenant: a.operator, action: auth.ActionAdmin, resource: a.operator + "/*/*"})
		if action == ActionWatch {
			// Brokers are the feed's readers: their node credential is
			// enough, so one credential serves registration and the feed.
			out = append(out, need{tenant: a.operator, action: auth.ActionClusterNode, resource: a.operator + "/cluster/node"})
		}
	}
	return out
}

// Authorize implements Authorizer. A token that fails verification is 401
// with auth's reason; a valid token of another tenant, or one lacking the
// permission, is 403.
func (a *FelixTokenAuthorizer) Authorize(r *http.Request, action, resource string) error {
	tok, err := bearer(r)
	if err != nil {
		return err
	}
	needs := a.needs(action, resource)
	switch action {
	case ActionClusterView, ActionClusterNode, ActionNodeMint, ActionClusterManage:
		needs = a.clusterNeeds(action, resource, tok)
	}
	if len(needs) == 0 {
		return Forbidden("%s on %s is reserved to the bootstrap token (no operator tenant is configured)", action, resource)
	}
	var verifyErr, checkErr error
	for _, n := range needs {
		claims, err := a.v.Verify(r.Context(), n.tenant, tok)
		if err != nil {
			if verifyErr == nil || !errors.Is(err, auth.ErrTenant) {
				verifyErr = err
			}
			continue
		}
		if n.action == "" {
			return nil
		}
		if err := auth.Check(claims, n.action, n.resource); err != nil {
			checkErr = err
			continue
		}
		if n.subject != "" && claims.Subject != n.subject {
			checkErr = fmt.Errorf("a node credential of %q renews only itself, not %q", claims.Subject, n.subject)
			continue
		}
		return nil
	}
	switch {
	case checkErr != nil:
		return Forbidden("%s on %s: %v", action, resource, checkErr)
	case errors.Is(verifyErr, auth.ErrTenant):
		return Forbidden("%s on %s: %v", action, resource, verifyErr)
	}
	return Unauthenticated("felix token rejected (%s): %v", auth.Reason(verifyErr), verifyErr)
}

// Authenticate implements Authenticator: the token verifies with the keys
// of the tenant it names.
func (a *FelixTokenAuthorizer) Authenticate(r *http.Request) error {
	tok, err := bearer(r)
	if err != nil {
		return err
	}
	if _, err := a.v.Verify(r.Context(), unverifiedTenant(tok), tok); err != nil {
		return Unauthenticated("felix token rejected (%s): %v", auth.Reason(err), err)
	}
	return nil
}

// AnyOf allows a request that any of its authorizers allows. Refusals
// report the most useful error: a forbidden (valid credentials) over an
// unauthenticated one. The bootstrap listener uses AnyOf{bootstrap, felix}.
type AnyOf []Authorizer

// Authorize implements Authorizer.
func (as AnyOf) Authorize(r *http.Request, action, resource string) error {
	var first error
	for _, a := range as {
		err := a.Authorize(r, action, resource)
		if err == nil {
			return nil
		}
		if first == nil || errors.Is(err, ErrForbidden) && !errors.Is(first, ErrForbidden) {
			first = err
		}
	}
	if first == nil {
		return Unauthenticated("no authorizer configured")
	}
	return first
}

// Authenticate implements Authenticator: one of the authorizers accepts
// the credential (one that cannot say is taken to accept it).
func (as AnyOf) Authenticate(r *http.Request) error {
	var first error
	for _, a := range as {
		au, ok := a.(Authenticator)
		if !ok {
			return nil
		}
		err := au.Authenticate(r)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return Unauthenticated("no authorizer configured")
	}
	return first
}
