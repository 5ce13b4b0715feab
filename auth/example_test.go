package auth_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/auth"
)

// The broker's side of the contract, as in broker/auth.go: an Action type,
// a Principal and a Verifier. Declared here so the proposed adapter below
// compiles against the real auth API.
type Action string

var ErrAuth = errors.New("broker: authentication failed")

type Principal interface {
	Tenant() string
	Allowed(action Action, resource string) bool
}

// felixVerifier adapts *auth.Verifier to the broker's Verifier.
type felixVerifier struct{ v *auth.Verifier }

func (f felixVerifier) Verify(ctx context.Context, tenant, token string) (Principal, error) {
	c, err := f.v.Verify(ctx, tenant, token)
	if err != nil {
		// Both sentinels stay visible to errors.Is; auth.Reason(err)
		// gives the wire error's code.
		return nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	return felixPrincipal{c}, nil
}

// felixPrincipal carries the verified claims for the life of the stream.
type felixPrincipal struct{ c *auth.Claims }

func (p felixPrincipal) Tenant() string { return p.c.Tenant }

func (p felixPrincipal) Allowed(a Action, resource string) bool {
	return auth.Check(p.c, auth.Action(a), resource) == nil
}

// Expiry lets the broker close the stream when the token expires.
func (p felixPrincipal) Expiry() time.Time { return p.c.Expiry }

// Example_brokerAdapter shows the broker verifying a Felix token minted by the
// control plane, and checking operations against it.
func Example_brokerAdapter() {
	m, _ := auth.NewMinter(auth.MinterConfig{TTL: 15 * time.Minute})
	_ = m.AddTenant("t1")
	token, _, _ := m.Mint("t1", "alice", []auth.Permission{{Action: auth.ActionPublish, Resource: "t1/default/*"}})

	// In the broker the KeySource is a JWKSKeySource on the control plane.
	v, _ := auth.NewVerifier(auth.VerifierConfig{Keys: m})
	var bv interface {
		Verify(context.Context, string, string) (Principal, error)
	} = felixVerifier{v}

	p, err := bv.Verify(context.Background(), "t1", token)
	fmt.Println(err, p.Tenant())
	fmt.Println(p.Allowed("stream.publish", "stream:t1/default/orders"))
	fmt.Println(p.Allowed("stream.subscribe", "stream:t1/default/orders"))
	_, err = bv.Verify(context.Background(), "t2", token)
	fmt.Println(errors.Is(err, ErrAuth), auth.Reason(err))
	// Output:
	// <nil> t1
	// true
	// false
	// true tenant
}
