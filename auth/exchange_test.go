package auth

import (
	"context"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

// The end-to-end flow at package level: an RS256 IdP token whose key
// has no alg is exchanged for a Felix token carrying the role's permissions;
// the broker side verifies it locally and allows only what the role grants.
func TestExchangeIdPTokenForFelixToken(t *testing.T) {
	fx := newIdPFixture(t)
	m := newTestMinter(t, fx.clk, "t1", "t2")
	brokerSide := newTestVerifier(t, fx.clk, m)
	ctx := context.Background()

	idpTok := signJWT(t, jose.RS256, testRSA(t, 0), "rsa1", fx.claims(nil))
	raw, minted, err := Exchange(ctx, fx.v, m, "t1", idpTok, nil)
	require.NoError(t, err)
	require.Equal(t, []Permission{{ActionPublish, "t1/default/*"}}, minted.Perms)

	claims, err := brokerSide.Verify(ctx, "t1", raw)
	require.NoError(t, err)
	require.NoError(t, Check(claims, ActionPublish, "stream:t1/default/orders"))
	err = Check(claims, ActionSubscribe, "stream:t1/default/orders")
	require.ErrorIs(t, err, ErrForbidden)
	require.ErrorContains(t, err, "stream.subscribe")

	_, err = brokerSide.Verify(ctx, "t2", raw)
	require.ErrorIs(t, err, ErrTenant, "a token for t1 never works for t2")

	fx.clk.Advance(16 * time.Minute)
	_, err = brokerSide.Verify(ctx, "t1", raw)
	require.ErrorIs(t, err, ErrExpired)
}

func TestExchangeRefusesIdentityWithoutGrants(t *testing.T) {
	fx := newIdPFixture(t)
	m := newTestMinter(t, fx.clk, "t1")
	ctx := context.Background()
	noRoles := signJWT(t, jose.RS256, testRSA(t, 0), "rsa1", fx.claims(func(c map[string]any) { c["roles"] = []string{"Unrelated"} }))
	_, _, err := Exchange(ctx, fx.v, m, "t1", noRoles, nil)
	require.ErrorIs(t, err, ErrForbidden)

	// Narrowing never widens: asking for subscribe with a publisher role
	// yields nothing.
	pub := signJWT(t, jose.RS256, testRSA(t, 0), "rsa1", fx.claims(nil))
	_, _, err = Exchange(ctx, fx.v, m, "t1", pub, []Action{ActionSubscribe})
	require.ErrorIs(t, err, ErrForbidden)
	_, c, err := Exchange(ctx, fx.v, m, "t1", pub, []Action{ActionPublish})
	require.NoError(t, err)
	require.Len(t, c.Perms, 1)

	_, _, err = Exchange(ctx, fx.v, m, "t1", "garbage", nil)
	require.ErrorIs(t, err, ErrMalformed)
}
