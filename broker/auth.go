package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/auth"
)

// Principal is who an auth frame proved the peer to be.
type Principal interface {
	// Tenant is the tenant the credential belongs to.
	Tenant() string
	// Check returns nil if the principal may do action on resource, e.g.
	// (auth.ActionPublish, "stream:t1/default/orders"), and otherwise an
	// error naming what is missing. The actions are auth's RBAC actions.
	Check(action auth.Action, resource string) error
	// Expiry is when the credential stops being valid; the broker ends
	// the streams it authenticated then. Zero: never.
	Expiry() time.Time
}

// Verifier checks the token of an auth frame: TokenVerifier (Felix EdDSA
// tokens checked against tenant keys), or DevVerifier; the broker only sees
// this interface.
type Verifier interface {
	Verify(ctx context.Context, tenant, token string) (Principal, error)
}

// DevVerifier accepts any token for the tenant it claims. It is what a nil
// Config.Verifier means, for in-process tests and for a felix-broker whose
// embedded control plane is switched off (`make run` verifies real tokens
// from it); New refuses it unless every listener is bound to a loopback
// address.
type DevVerifier struct{}

// Verify accepts any non-empty tenant.
func (DevVerifier) Verify(_ context.Context, tenant, _ string) (Principal, error) {
	if tenant == "" {
		return nil, fmt.Errorf("%w: empty tenant", ErrAuth)
	}
	return devPrincipal(tenant), nil
}

type devPrincipal string

func (p devPrincipal) Tenant() string                  { return string(p) }
func (p devPrincipal) Check(auth.Action, string) error { return nil }
func (p devPrincipal) Expiry() time.Time               { return time.Time{} }
func (p devPrincipal) Subject() string                 { return "dev" }

func streamResource(k StreamKey) string {
	return "stream:" + k.Tenant + "/" + k.Namespace + "/" + k.Stream
}
