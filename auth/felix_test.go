package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

var publishOrders = []Permission{{ActionPublish, "t1/default/orders"}, {ActionSubscribe, "t1/default/*"}}

func newTestMinter(t testing.TB, clk *testClock, tenants ...string) *Minter {
	m, err := NewMinter(MinterConfig{Now: clk.Now, TTL: 15 * time.Minute})
	require.NoError(t, err)
	for _, tn := range tenants {
		require.NoError(t, m.AddTenant(tn))
	}
	return m
}

func newTestVerifier(t testing.TB, clk *testClock, keys KeySource) *Verifier {
	v, err := NewVerifier(VerifierConfig{Keys: keys, Now: clk.Now, ClockSkew: 30 * time.Second})
	require.NoError(t, err)
	return v
}

func TestFelixTokenMintVerifyRoundTrip(t *testing.T) {
	clk := newClock()
	m := newTestMinter(t, clk, "t1")
	v := newTestVerifier(t, clk, m)
	raw, minted, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)
	got, err := v.Verify(context.Background(), "t1", raw)
	require.NoError(t, err)
	require.Equal(t, minted, got)
	require.Equal(t, "t1", got.Tenant)
	require.Equal(t, []string{DefaultFelixAudience}, got.Audience)
	require.Equal(t, clk.Now().Add(15*time.Minute), got.Expiry, "expiry exposed for closing streams")
	require.NoError(t, Check(got, ActionPublish, "stream:t1/default/orders"))
	require.ErrorIs(t, Check(got, ActionPublish, "stream:t1/default/payments"), ErrForbidden)
}

// Every rejection reason of a Felix token, each with its sentinel.
func TestFelixTokenRejections(t *testing.T) {
	clk := newClock()
	m := newTestMinter(t, clk, "t1", "t2")
	v := newTestVerifier(t, clk, m)
	ks, err := m.Keys("t1")
	require.NoError(t, err)
	good, _, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)
	now := clk.Now().Unix()
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"iss": "felix-auth", "aud": "felix-broker", "sub": "alice", "tid": "t1",
			"iat": now, "exp": now + 900, "perms": []map[string]string{{"action": "stream.publish", "resource": "t1/a/b"}}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	sign := func(c map[string]any) string { return signJWT(t, jose.EdDSA, ks.Current.Private, ks.Current.ID, c) }
	parts := strings.Split(good, ".")
	otherEd := testEd(t)

	cases := []struct {
		name   string
		tenant string
		token  string
		want   error
	}{
		{"control: forged with the real key", "t1", sign(claims(nil)), nil},
		{"empty", "t1", "", ErrMalformed},
		{"two parts", "t1", parts[0] + "." + parts[1], ErrMalformed},
		{"truncated signature", "t1", good[:len(good)-4], ErrSignature},
		{"garbage header", "t1", "!!!." + parts[1] + "." + parts[2], ErrMalformed},
		{"oversized", "t1", strings.Repeat("a", MaxTokenBytes+1), ErrMalformed},
		{"alg none", "t1", forgeJWT(map[string]any{"alg": "none", "kid": ks.Current.ID}, claims(nil), nil), ErrAlgorithm},
		{"HS256 with the public key as secret", "t1", forgeJWT(map[string]any{"alg": "HS256", "kid": ks.Current.ID}, claims(nil), ks.Current.Public()), ErrAlgorithm},
		{"RS256", "t1", signJWT(t, jose.RS256, testRSA(t, 0), ks.Current.ID, claims(nil)), ErrAlgorithm},
		{"no kid", "t1", signJWT(t, jose.EdDSA, ks.Current.Private, "", claims(nil)), ErrUnknownKey},
		{"unknown kid", "t1", signJWT(t, jose.EdDSA, ks.Current.Private, "nope", claims(nil)), ErrUnknownKey},
		{"signed by another key under our kid", "t1", signJWT(t, jose.EdDSA, otherEd, ks.Current.ID, claims(nil)), ErrSignature},
		{"tampered payload", "t1", parts[0] + "." + strings.Split(sign(claims(func(c map[string]any) { c["sub"] = "mallory" })), ".")[1] + "." + parts[2], ErrSignature},
		{"token of t1 presented for t2", "t2", good, ErrTenant},
		{"no tid", "t1", sign(claims(func(c map[string]any) { delete(c, "tid") })), ErrTenant},
		{"wrong issuer", "t1", sign(claims(func(c map[string]any) { c["iss"] = "evil" })), ErrIssuer},
		{"wrong audience", "t1", sign(claims(func(c map[string]any) { c["aud"] = []string{"felix-controlplane"} })), ErrAudience},
		{"expired", "t1", sign(claims(func(c map[string]any) { c["iat"] = now - 1000; c["exp"] = now - 31 })), ErrExpired},
		{"no exp", "t1", sign(claims(func(c map[string]any) { delete(c, "exp") })), ErrExpired},
		{"iat in the future", "t1", sign(claims(func(c map[string]any) { c["iat"] = now + 120 })), ErrIssuedAt},
		{"no iat", "t1", sign(claims(func(c map[string]any) { delete(c, "iat") })), ErrIssuedAt},
		{"no sub", "t1", sign(claims(func(c map[string]any) { delete(c, "sub") })), ErrClaims},
		{"grant on another tenant", "t1", sign(claims(func(c map[string]any) {
			c["perms"] = []map[string]string{{"action": "admin", "resource": "t2/*/*"}}
		})), ErrClaims},
		{"perms not a list", "t1", sign(claims(func(c map[string]any) { c["perms"] = "admin" })), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), c.tenant, c.token)
			if c.want == nil {
				require.NoError(t, err)
				require.NotNil(t, got)
				return
			}
			require.ErrorIs(t, err, c.want)
			require.Nil(t, got)
			require.NotEmpty(t, Reason(err), "every rejection has a reason code: %v", err)
		})
	}
}

func TestFelixTokenExpiryWithInjectedClock(t *testing.T) {
	clk := newClock()
	m := newTestMinter(t, clk, "t1")
	v := newTestVerifier(t, clk, m)
	raw, claims, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)

	clk.Advance(15*time.Minute + 30*time.Second) // exactly exp + skew: still valid
	_, err = v.Verify(context.Background(), "t1", raw)
	require.NoError(t, err)
	require.NoError(t, claims.Valid(clk.Now(), 30*time.Second))

	clk.Advance(time.Second)
	_, err = v.Verify(context.Background(), "t1", raw)
	require.ErrorIs(t, err, ErrExpired)
	require.Equal(t, "expired", Reason(err))
	require.ErrorIs(t, claims.Valid(clk.Now(), 30*time.Second), ErrExpired, "a verified token expires on a live stream too")
}

// NumericDate is whole seconds, so the expiry rounds up: a token minted at
// .99 with a 1.5 s TTL lives 2.01 s, not the 10 ms that truncating both
// the issue time and the expiry gave (a CI failure of the broker's expiry
// test).
func TestFelixTokenLivesAtLeastItsTTL(t *testing.T) {
	clk := newClock()
	clk.Advance(990 * time.Millisecond)
	m, err := NewMinter(MinterConfig{Now: clk.Now, TTL: 1500 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, m.AddTenant("t1"))
	_, c, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)
	require.Equal(t, clk.Now().Truncate(time.Second), c.IssuedAt)
	require.Equal(t, clk.Now().Truncate(time.Second).Add(3*time.Second), c.Expiry)
}

// Rotation: new tokens use the new key, tokens of the previous key verify
// until they expire, and the JWKS carries both.
func TestFelixKeyRotation(t *testing.T) {
	clk := newClock()
	m := newTestMinter(t, clk, "t1")
	v := newTestVerifier(t, clk, m)
	ctx := context.Background()
	before, _ := m.Keys("t1")
	oldTok, _, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)

	newKid, err := m.Rotate("t1")
	require.NoError(t, err)
	require.NotEqual(t, before.Current.ID, newKid)
	newTok, _, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)
	h, err := parseHeader(newTok)
	require.NoError(t, err)
	require.Equal(t, newKid, h.Kid, "new tokens are signed with the new key")

	for _, tok := range []string{oldTok, newTok} {
		_, err := v.Verify(ctx, "t1", tok)
		require.NoError(t, err)
	}
	jwks, err := m.JWKS("t1")
	require.NoError(t, err)
	keys, _, err := ParseJWKS(jwks)
	require.NoError(t, err)
	require.Contains(t, keys, before.Current.ID)
	require.Contains(t, keys, newKid)
	require.Equal(t, EdDSA, keys[newKid].Algorithm)

	// Past TTL + skew the old key can sign nothing live; the next rotation
	// drops it and keeps the one just retired.
	clk.Advance(16*time.Minute + time.Second)
	third, err := m.Rotate("t1")
	require.NoError(t, err)
	ks, _ := m.Keys("t1")
	require.Equal(t, third, ks.Current.ID)
	require.Len(t, ks.Previous, 1)
	require.Equal(t, newKid, ks.Previous[0].ID)
	_, err = v.Verify(ctx, "t1", oldTok)
	require.Error(t, err)
}

// The broker's path: tenant keys fetched from the control plane's JWKS
// endpoint through the Fetcher; a rotation is picked up by the unknown-kid
// refresh once the rate limit allows.
func TestFelixVerifyThroughJWKSKeySourceAcrossRotation(t *testing.T) {
	clk := newClock()
	m := newTestMinter(t, clk, "t1", "t2")
	fetches := 0
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches++
		tenant := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/tenants/"), "/.well-known/jwks.json")
		b, err := m.JWKS(tenant)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(cp.Close)
	src := JWKSKeySource{Fetcher: newTestFetcher(t, clk), URL: func(tenant string) string {
		return cp.URL + "/v1/tenants/" + tenant + "/.well-known/jwks.json"
	}}
	v := newTestVerifier(t, clk, src)
	ctx := context.Background()

	tok1, _, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)
	for range 3 {
		_, err = v.Verify(ctx, "t1", tok1)
		require.NoError(t, err)
	}
	require.Equal(t, 1, fetches, "warm verification does not call the control plane")

	_, err = m.Rotate("t1")
	require.NoError(t, err)
	tok2, _, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)
	clk.Advance(31 * time.Second)
	_, err = v.Verify(ctx, "t1", tok2)
	require.NoError(t, err)
	_, err = v.Verify(ctx, "t1", tok1)
	require.NoError(t, err, "old token still verifies after rotation")
	require.Equal(t, 2, fetches)

	// Tenant isolation holds through the fetched path as well.
	_, err = v.Verify(ctx, "t2", tok1)
	require.ErrorIs(t, err, ErrTenant)
}

func TestMemoryKeySource(t *testing.T) {
	clk := newClock()
	m := newTestMinter(t, clk, "t1")
	src := NewMemoryKeySource()
	jwks, err := m.JWKS("t1")
	require.NoError(t, err)
	require.NoError(t, src.SetJWKS("t1", jwks))
	v := newTestVerifier(t, clk, src)
	tok, _, err := m.Mint("t1", "alice", publishOrders)
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), "t1", tok)
	require.NoError(t, err)

	// An RSA key under a Felix tenant is refused outright.
	err = src.SetJWKS("t1", jwksJSON(jwkJSON(t, &testRSA(t, 0).PublicKey, "rsa", "")))
	require.ErrorIs(t, err, ErrAlgorithm)
	src.RemoveTenant("t1")
	_, err = v.Verify(context.Background(), "t1", tok)
	require.ErrorIs(t, err, ErrTenant)
}

func TestMintRefusesBadGrants(t *testing.T) {
	m := newTestMinter(t, newClock(), "t1")
	_, _, err := m.Mint("t1", "alice", []Permission{{ActionPublish, "t2/a/b"}})
	require.ErrorIs(t, err, ErrConfig)
	_, _, err = m.Mint("t1", "alice", nil)
	require.ErrorIs(t, err, ErrForbidden)
	_, _, err = m.Mint("t9", "alice", publishOrders)
	require.ErrorIs(t, err, ErrTenant)
	_, _, err = m.Mint("t1", "", publishOrders)
	require.ErrorIs(t, err, ErrClaims)
	require.ErrorIs(t, m.AddTenant("t1"), ErrConfig)
	_, err = NewMinter(MinterConfig{TTL: 48 * time.Hour})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewVerifier(VerifierConfig{})
	require.ErrorIs(t, err, ErrConfig)
}

// Minting, verifying, rotating and reading the JWKS at once: for -race, and
// to show a rotation never fails a token minted before or after it.
func TestFelixConcurrentMintVerifyRotate(t *testing.T) {
	clk := newClock()
	m := newTestMinter(t, clk, "t1")
	v := newTestVerifier(t, clk, m)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 4 {
		wg.Go(func() {
			for range 25 {
				raw, _, err := m.Mint("t1", "alice", publishOrders)
				if err == nil {
					_, err = v.Verify(context.Background(), "t1", raw)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			if _, err := m.Rotate("t1"); err != nil {
				errs <- err
				return
			}
			if _, err := m.JWKS("t1"); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
