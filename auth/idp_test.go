package auth

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

const (
	testIssuer   = "https://login.example.test/tenant-guid/v2.0"
	testAudience = "api://felix"
)

// idpFixture is a real local identity provider: an httptest JWKS endpoint
// serving an RSA key without alg (as Entra ID does), an EC key and an
// Ed25519 key, and a verifier trusting it for tenant t1.
type idpFixture struct {
	srv *idpServer
	clk *testClock
	v   *IdPVerifier
}

func newIdPFixture(t testing.TB) *idpFixture {
	srv := newIdPServer(t, jwksJSON(
		jwkJSON(t, &testRSA(t, 0).PublicKey, "rsa1", ""),
		jwkJSON(t, &testEC(t).PublicKey, "ec1", ES256),
		jwkJSON(t, testEd(t).Public(), "ed1", ""),
	))
	clk := newClock()
	f := newTestFetcher(t, clk)
	v, err := NewIdPVerifier(IdPConfig{Fetcher: f, Now: clk.Now, Tenants: []TenantConfig{{
		Tenant: "t1",
		Issuers: []IssuerConfig{{
			Issuer: testIssuer, JWKSURL: srv.URL, Audiences: []string{"other-app", testAudience},
			Algorithms: []string{RS256, ES256, EdDSA},
		}},
		Policy: Policy{
			Roles: map[string][]Permission{
				"publisher":  {{ActionPublish, "t1/default/*"}},
				"subscriber": {{ActionSubscribe, "t1/default/*"}},
			},
			Bindings: map[string][]string{"Felix.Publisher": {"publisher"}, "Felix.Subscriber": {"subscriber"}},
		},
	}}})
	require.NoError(t, err)
	return &idpFixture{srv: srv, clk: clk, v: v}
}

func (fx *idpFixture) claims(edit func(map[string]any)) map[string]any {
	now := fx.clk.Now().Unix()
	c := map[string]any{"iss": testIssuer, "aud": testAudience, "sub": "user-1",
		"iat": now, "nbf": now, "exp": now + 3600, "roles": []string{"Felix.Publisher"}}
	if edit != nil {
		edit(c)
	}
	return c
}

func TestIdPVerifyAcceptsEachKeyType(t *testing.T) {
	fx := newIdPFixture(t)
	for _, c := range []struct {
		alg jose.SignatureAlgorithm
		key any
		kid string
	}{
		{jose.RS256, testRSA(t, 0), "rsa1"}, // RSA key with no alg in the JWKS
		{jose.ES256, testEC(t), "ec1"},
		{jose.EdDSA, testEd(t), "ed1"},
	} {
		t.Run(string(c.alg), func(t *testing.T) {
			id, err := fx.v.Verify(context.Background(), "t1", signJWT(t, c.alg, c.key, c.kid, fx.claims(nil)))
			require.NoError(t, err)
			require.Equal(t, "user-1", id.Subject)
			require.Equal(t, testIssuer, id.Issuer)
			require.Equal(t, []string{"Felix.Publisher"}, id.Roles)
			require.Len(t, id.Principal, 64)
		})
	}
	require.EqualValues(t, 1, fx.srv.fetches.Load())
}

// Every rejection reason of an IdP token, each with its sentinel.
func TestIdPVerifyRejections(t *testing.T) {
	fx := newIdPFixture(t)
	rsa := testRSA(t, 0)
	sign := func(c map[string]any) string { return signJWT(t, jose.RS256, rsa, "rsa1", c) }
	good := sign(fx.claims(nil))
	parts := strings.Split(good, ".")
	now := fx.clk.Now().Unix()

	cases := []struct {
		name   string
		tenant string
		token  string
		want   error
	}{
		{"control", "t1", good, nil},
		{"within clock skew", "t1", sign(fx.claims(func(c map[string]any) { c["iat"], c["nbf"], c["exp"] = now-600, now-600, now-59 })), nil},
		{"aud as a list", "t1", sign(fx.claims(func(c map[string]any) { c["aud"] = []string{"x", testAudience} })), nil},
		{"unknown tenant", "t9", good, ErrTenant},
		{"garbage", "t1", "not-a-token", ErrMalformed},
		{"truncated to two parts", "t1", parts[0] + "." + parts[1], ErrMalformed},
		{"truncated signature", "t1", good[:len(good)-8], ErrSignature},
		{"header not JSON", "t1", "bm90IGpzb24." + parts[1] + "." + parts[2], ErrMalformed},
		{"payload not JSON", "t1", parts[0] + ".bm90IGpzb24." + parts[2], ErrMalformed},
		{"crit header", "t1", forgeJWT(map[string]any{"alg": "RS256", "kid": "rsa1", "crit": []string{"exp"}}, fx.claims(nil), []byte("x")), ErrMalformed},
		{"alg none", "t1", forgeJWT(map[string]any{"alg": "none", "kid": "rsa1"}, fx.claims(nil), nil), ErrAlgorithm},
		{"alg NONE", "t1", forgeJWT(map[string]any{"alg": "NONE", "kid": "rsa1"}, fx.claims(nil), nil), ErrAlgorithm},
		{"HS256 keyed with the RSA public key", "t1", forgeJWT(map[string]any{"alg": "HS256", "kid": "rsa1"}, fx.claims(nil), rsaPublicDER(t, &rsa.PublicKey)), ErrAlgorithm},
		{"PS256 not allowed for this issuer", "t1", signJWT(t, jose.PS256, rsa, "rsa1", fx.claims(nil)), ErrAlgorithm},
		{"RS256 under the EC key's kid", "t1", signJWT(t, jose.RS256, rsa, "ec1", fx.claims(nil)), ErrAlgorithm},
		{"EdDSA under the RSA key's kid", "t1", signJWT(t, jose.EdDSA, testEd(t), "rsa1", fx.claims(nil)), ErrAlgorithm},
		{"no kid", "t1", signJWT(t, jose.RS256, rsa, "", fx.claims(nil)), ErrUnknownKey},
		{"wrong kid", "t1", signJWT(t, jose.RS256, rsa, "rsa-unknown", fx.claims(nil)), ErrUnknownKey},
		{"signed by another RSA key", "t1", signJWT(t, jose.RS256, testRSA(t, 1), "rsa1", fx.claims(nil)), ErrSignature},
		{"tampered payload", "t1", parts[0] + "." + strings.Split(sign(fx.claims(func(c map[string]any) { c["sub"] = "admin" })), ".")[1] + "." + parts[2], ErrSignature},
		{"wrong issuer", "t1", sign(fx.claims(func(c map[string]any) { c["iss"] = "https://evil.test" })), ErrIssuer},
		{"no issuer", "t1", sign(fx.claims(func(c map[string]any) { delete(c, "iss") })), ErrIssuer},
		{"wrong audience", "t1", sign(fx.claims(func(c map[string]any) { c["aud"] = "api://someone-else" })), ErrAudience},
		{"no audience", "t1", sign(fx.claims(func(c map[string]any) { delete(c, "aud") })), ErrAudience},
		{"expired", "t1", sign(fx.claims(func(c map[string]any) { c["exp"] = now - 61 })), ErrExpired},
		{"no exp", "t1", sign(fx.claims(func(c map[string]any) { delete(c, "exp") })), ErrExpired},
		{"not yet valid", "t1", sign(fx.claims(func(c map[string]any) { c["nbf"] = now + 120 })), ErrNotYetValid},
		{"issued in the future", "t1", sign(fx.claims(func(c map[string]any) { c["iat"] = now + 120 })), ErrIssuedAt},
		{"issued after expiry", "t1", sign(fx.claims(func(c map[string]any) { c["iat"] = now + 30; c["exp"] = now + 20 })), ErrIssuedAt},
		{"no sub", "t1", sign(fx.claims(func(c map[string]any) { delete(c, "sub") })), ErrClaims},
		{"roles not strings", "t1", sign(fx.claims(func(c map[string]any) { c["roles"] = 42 })), ErrClaims},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := fx.v.Verify(context.Background(), c.tenant, c.token)
			if c.want == nil {
				require.NoError(t, err)
				require.NotNil(t, id)
				return
			}
			require.ErrorIs(t, err, c.want)
			require.Nil(t, id)
			require.NotEmpty(t, Reason(err))
		})
	}
}

func TestIdPVerifyJWKSUnavailable(t *testing.T) {
	fx := newIdPFixture(t)
	good := signJWT(t, jose.RS256, testRSA(t, 0), "rsa1", fx.claims(nil))
	fx.srv.set(http.StatusBadGateway, []byte("<html>bad gateway</html>"))
	_, err := fx.v.Verify(context.Background(), "t1", good)
	require.ErrorIs(t, err, ErrJWKSUnavailable)
	require.ErrorContains(t, err, "502")

	// The IdP comes back; after the rate-limit interval logins work again.
	fx.srv.set(http.StatusOK, jwksJSON(jwkJSON(t, &testRSA(t, 0).PublicKey, "rsa1", "")))
	fx.clk.Advance(31 * time.Second)
	good = signJWT(t, jose.RS256, testRSA(t, 0), "rsa1", fx.claims(nil))
	_, err = fx.v.Verify(context.Background(), "t1", good)
	require.NoError(t, err)

	// Garbage is rejected before it reaches the network.
	before := fx.srv.fetches.Load()
	for _, junk := range []string{"x.y.z", "", "a.b", forgeJWT(map[string]any{"alg": "none"}, fx.claims(nil), nil)} {
		_, err := fx.v.Verify(context.Background(), "t1", junk)
		require.Error(t, err)
	}
	require.Equal(t, before, fx.srv.fetches.Load())
}

func TestIdPConfigValidation(t *testing.T) {
	f := newTestFetcher(t, newClock())
	ok := IssuerConfig{Issuer: "https://i", JWKSURL: "https://i/jwks", Audiences: []string{"a"}}
	for name, edit := range map[string]func(*IssuerConfig){
		"HS256":           func(c *IssuerConfig) { c.Algorithms = []string{"HS256"} },
		"none":            func(c *IssuerConfig) { c.Algorithms = []string{"none"} },
		"no audience":     func(c *IssuerConfig) { c.Audiences = nil },
		"empty audience":  func(c *IssuerConfig) { c.Audiences = []string{""} },
		"bad JWKS URL":    func(c *IssuerConfig) { c.JWKSURL = "file:///etc/passwd" },
		"no issuer":       func(c *IssuerConfig) { c.Issuer = "" },
		"huge clock skew": func(c *IssuerConfig) { c.ClockSkew = time.Hour },
	} {
		t.Run(name, func(t *testing.T) {
			ic := ok
			edit(&ic)
			_, err := NewIdPVerifier(IdPConfig{Fetcher: f, Tenants: []TenantConfig{{Tenant: "t1", Issuers: []IssuerConfig{ic}}}})
			require.ErrorIs(t, err, ErrConfig)
		})
	}
	_, err := NewIdPVerifier(IdPConfig{Fetcher: f, Tenants: []TenantConfig{{Tenant: "t1", Issuers: []IssuerConfig{ok}}}})
	require.NoError(t, err)
	_, err = NewIdPVerifier(IdPConfig{})
	require.ErrorIs(t, err, ErrConfig)
}

func TestIdPVerifierTenantsChangeWhileServing(t *testing.T) {
	fx := newIdPFixture(t)
	ctx := context.Background()
	tok := signJWT(t, jose.RS256, testRSA(t, 0), "rsa1", fx.claims(nil))
	_, err := fx.v.Verify(ctx, "t2", tok)
	require.ErrorIs(t, err, ErrTenant)

	require.NoError(t, fx.v.SetTenant(TenantConfig{Tenant: "t2", Issuers: []IssuerConfig{{
		Issuer: testIssuer, JWKSURL: fx.srv.URL, Audiences: []string{testAudience},
	}}}))
	id, err := fx.v.Verify(ctx, "t2", tok)
	require.NoError(t, err)
	require.Equal(t, "t2", id.Tenant)

	fx.v.RemoveTenant("t2")
	_, err = fx.v.Verify(ctx, "t2", tok)
	require.ErrorIs(t, err, ErrTenant)
	require.ErrorIs(t, fx.v.SetTenant(TenantConfig{Tenant: "t3", Policy: Policy{
		Roles: map[string][]Permission{"r": {{ActionPublish, "t1/a/b"}}}}}), ErrConfig)
}
