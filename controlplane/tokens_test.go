package controlplane

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
)

// A control plane that finds a tenant's keys missing (another one is
// between the delete and the create of a rotation) stores back the set it
// holds instead of a fresh one, so no live token's key is lost.
func TestMissingKeysMidRotationAreStoredBack(t *testing.T) {
	ctx := context.Background()
	ms, err := NewMemoryStore(MemoryConfig{})
	require.NoError(t, err)
	a := newAuthPlane(t, ms)
	b, err := NewTokens(ms, TokensConfig{})
	require.NoError(t, err)
	a.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", `{"tenant":"t1"}`)
	before, err := a.tokens.minter.Keys("t1")
	require.NoError(t, err)
	_, err = b.JWKS(ctx, "t1")
	require.NoError(t, err)

	_, err = ms.Delete(ctx, tenantKeysRef("t1")) // a rotation's first half
	require.NoError(t, err)
	_, err = b.PublicKey(ctx, "t1", before.Current.ID)
	require.NoError(t, err)
	got, err := b.minter.Keys("t1")
	require.NoError(t, err)
	require.Equal(t, before.Current.ID, got.Current.ID)

	kid, err := a.tokens.Rotate(ctx, "t1")
	require.NoError(t, err)
	_, err = b.PublicKey(ctx, "t1", kid)
	require.NoError(t, err, "b sees a's rotation")
	_, err = b.PublicKey(ctx, "t1", before.Current.ID)
	require.NoError(t, err, "the previous key still verifies")
}

// A tenant deleted and created again gets fresh keys: tokens of the first
// one do not verify for the second.
func TestRecreatedTenantHasFreshKeys(t *testing.T) {
	idp := newTestIdP(t)
	p := newAuthPlane(t, nil)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("t1", idp.URL))
	old := p.mustExchange(t, "t1", idp.token(t, "root", []string{"Felix.Admin"}, nil))
	p.boot.mustDo(t, http.StatusOK, "DELETE", "/v1/tenants/t1", "")
	r := p.main.doToken(t, "GET", "/v1/tenants/t1/namespaces", "", old.Token)
	require.Equal(t, http.StatusUnauthorized, r.status, r.body)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("t1", idp.URL))
	r = p.main.doToken(t, "GET", "/v1/tenants/t1/namespaces", "", old.Token)
	require.Equal(t, http.StatusUnauthorized, r.status, r.body)
	require.Contains(t, r.body, "unknown_key")
}

// Mint signs with the tenant's stored key: the token passes the main
// listener's Felix authorizer, and a tenant that does not exist gets none.
func TestMintWithStoredKeys(t *testing.T) {
	p := newAuthPlane(t, nil)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", `{"tenant":"t1"}`)
	tok, claims, err := p.tokens.Mint(context.Background(), "t1", "dev", []auth.Permission{{Action: auth.ActionAdmin, Resource: "t1/*/*"}})
	require.NoError(t, err)
	require.Equal(t, "t1", claims.Tenant)
	r := p.main.doToken(t, "GET", "/v1/tenants/t1/namespaces", "", tok)
	require.Equal(t, http.StatusOK, r.status, r.body)
	_, _, err = p.tokens.Mint(context.Background(), "ghost", "dev", nil)
	require.ErrorIs(t, err, ErrNotFound)
}
