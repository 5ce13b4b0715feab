package controlplane

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

// authPlane is a control plane as cmd/felix-controlplane runs it: one
// Tokens shared by the bootstrap listener (bootstrap token or Felix token)
// and the main listener (Felix tokens only).
type authPlane struct {
	boot, main *instance
	tokens     *Tokens
}

func newAuthPlane(t testing.TB, st Store) *authPlane {
	if st == nil {
		ms, err := NewMemoryStore(MemoryConfig{})
		require.NoError(t, err)
		t.Cleanup(func() { ms.Close() })
		st = ms
	}
	tokens, err := NewTokens(st, TokensConfig{})
	require.NoError(t, err)
	felix, err := NewFelixTokenAuthorizer(FelixTokenConfig{Keys: tokens})
	require.NoError(t, err)
	boot, err := NewBootstrapAuthorizer(testToken)
	require.NoError(t, err)
	mk := func(a Authorizer) *instance {
		srv, err := New(Config{Store: st, Authorizer: a, Tokens: tokens})
		require.NoError(t, err)
		hs := httptest.NewServer(srv)
		t.Cleanup(func() { srv.Close(); hs.Close() })
		return &instance{srv: srv, url: hs.URL}
	}
	return &authPlane{boot: mk(AnyOf{boot, felix}), main: mk(felix), tokens: tokens}
}

// exchange posts an IdP token and returns the reply.
func (p *authPlane) exchange(t testing.TB, tenant, idpToken string, actions ...string) reply {
	body, _ := json.Marshal(map[string]any{"tenant": tenant, "idp_token": idpToken, "actions": actions})
	return p.main.doToken(t, http.MethodPost, "/v1/token/exchange", string(body), "")
}

func (p *authPlane) mustExchange(t testing.TB, tenant, idpToken string) api.ExchangeResponse {
	t.Helper()
	r := p.exchange(t, tenant, idpToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	var out api.ExchangeResponse
	r.decode(t, &out)
	require.NotEmpty(t, out.Token)
	require.WithinDuration(t, time.Now().Add(15*time.Minute), out.ExpiresAt, time.Minute)
	return out
}

// brokerVerifier verifies Felix tokens as a broker does: tenant JWKS
// fetched over HTTP from the control plane.
func brokerVerifier(t testing.TB, cpURL string) *auth.Verifier {
	f, err := auth.NewFetcher(auth.FetcherConfig{})
	require.NoError(t, err)
	v, err := auth.NewVerifier(auth.VerifierConfig{Keys: auth.JWKSKeySource{Fetcher: f, URL: func(tenant string) string {
		return cpURL + "/v1/tenants/" + tenant + "/.well-known/jwks.json"
	}}})
	require.NoError(t, err)
	return v
}

func errorCode(t testing.TB, r reply) string {
	var e api.ErrorBody
	r.decode(t, &e)
	require.NotEmpty(t, e.RequestID)
	return e.Code
}

// The token exchange end to end on the control plane's side: a real IdP
// (RSA key without alg, RS256), exchange, broker-style verification from
// the JWKS served over HTTP, permissions by role.
func TestExchangeRealIdPPermissionsByRole(t *testing.T) {
	idp := newTestIdP(t)
	p := newAuthPlane(t, nil)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("t1", idp.URL))

	w := p.mustExchange(t, "t1", idp.token(t, "alice", []string{"Felix.Writer"}, nil))
	r := p.mustExchange(t, "t1", idp.token(t, "bob", []string{"Felix.Reader"}, nil))

	jw := p.main.doToken(t, "GET", "/v1/tenants/t1/.well-known/jwks.json", "", "")
	require.Equal(t, http.StatusOK, jw.status, jw.body)
	require.Equal(t, "public, max-age=60", jw.header.Get("Cache-Control"))
	require.Contains(t, jw.body, `"crv":"Ed25519"`)
	require.NotContains(t, jw.body, `"d"`)

	v := brokerVerifier(t, p.main.url)
	ctx := context.Background()
	wc, err := v.Verify(ctx, "t1", w.Token)
	require.NoError(t, err)
	rc, err := v.Verify(ctx, "t1", r.Token)
	require.NoError(t, err)
	require.NoError(t, auth.Check(wc, auth.ActionPublish, "stream:t1/default/orders"))
	require.NoError(t, auth.Check(wc, auth.ActionSubscribe, "stream:t1/default/orders"))
	require.NoError(t, auth.Check(rc, auth.ActionSubscribe, "stream:t1/default/orders"))
	require.ErrorIs(t, auth.Check(rc, auth.ActionPublish, "stream:t1/default/orders"), auth.ErrForbidden)
	require.ErrorIs(t, auth.Check(wc, auth.ActionPublish, "stream:t1/other/orders"), auth.ErrForbidden)

	// Narrowing to requested actions; a role that earns nothing is forbidden.
	n := p.exchange(t, "t1", idp.token(t, "alice", []string{"Felix.Writer"}, nil), "stream.subscribe")
	require.Equal(t, http.StatusOK, n.status, n.body)
	var nr api.ExchangeResponse
	n.decode(t, &nr)
	nc, err := v.Verify(ctx, "t1", nr.Token)
	require.NoError(t, err)
	require.ErrorIs(t, auth.Check(nc, auth.ActionPublish, "stream:t1/default/orders"), auth.ErrForbidden)
	none := p.exchange(t, "t1", idp.token(t, "eve", []string{"Unrelated"}, nil))
	require.Equal(t, http.StatusForbidden, none.status, none.body)
	require.Equal(t, "forbidden", errorCode(t, none))
}

// Each bad input is refused with its own code, and the control plane keeps
// serving.
func TestExchangeRejectsBadInputPrecisely(t *testing.T) {
	idp := newTestIdP(t)
	p := newAuthPlane(t, nil)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("t1", idp.URL))
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys": [ {"kty": "RSA", "n": 12`))
	}))
	t.Cleanup(garbage.Close)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("tdown", downURL))
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("tgarbage", garbage.URL))
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", `{"tenant":"noidp"}`)

	good := idp.token(t, "alice", []string{"Felix.Writer"}, nil)
	for _, tc := range []struct {
		name, tenant, token string
		status              int
		code                string
	}{
		{"malformed", "t1", "not.a.jwt", 401, "invalid_token"},
		{"garbage bytes", "t1", "\x00\x01", 401, "invalid_token"},
		{"alg none", "t1", idp.forged(t, map[string]any{"alg": "none", "kid": idp.kid}, nil), 401, "algorithm"},
		{"HS256 keyed with the RSA public key", "t1", idp.forged(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": idp.kid}, idp.publicDER(t)), 401, "algorithm"},
		{"wrong issuer", "t1", idp.token(t, "alice", nil, func(c map[string]any) { c["iss"] = "https://evil.example/v2.0" }), 401, "issuer"},
		{"wrong audience", "t1", idp.token(t, "alice", nil, func(c map[string]any) { c["aud"] = "api://other" }), 401, "audience"},
		{"expired", "t1", idp.token(t, "alice", nil, func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), 401, "expired"},
		{"bad signature", "t1", good[:len(good)-6] + "AAAAAA", 401, "signature"},
		{"IdP JWKS down", "tdown", good, 503, "jwks_unavailable"},
		{"IdP JWKS garbage", "tgarbage", good, 503, "jwks_unavailable"},
		{"tenant without IdP", "noidp", good, 401, "tenant"},
		{"unknown tenant", "nosuch", good, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p.exchange(t, tc.tenant, tc.token)
			require.Equal(t, tc.status, r.status, r.body)
			require.Equal(t, tc.code, errorCode(t, r), r.body)
		})
	}
	p.main.mustDo(t, http.StatusOK, "GET", "/v1/system/health", "")
	p.mustExchange(t, "t1", good)
}

// A token minted before a rotation still verifies (its key stays in the
// JWKS as previous); one minted after verifies too.
func TestKeyRotationKeepsOldTokens(t *testing.T) {
	idp := newTestIdP(t)
	p := newAuthPlane(t, nil)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("t1", idp.URL))
	admin := p.mustExchange(t, "t1", idp.token(t, "root", []string{"Felix.Admin"}, nil))
	before := p.mustExchange(t, "t1", idp.token(t, "alice", []string{"Felix.Writer"}, nil))

	writer := p.mustExchange(t, "t1", idp.token(t, "alice", []string{"Felix.Writer"}, nil))
	rr := p.main.doToken(t, "POST", "/v1/tenants/t1/keys/rotate", "", writer.Token)
	require.Equal(t, http.StatusForbidden, rr.status, rr.body)
	rr = p.main.doToken(t, "POST", "/v1/tenants/t1/keys/rotate", "", admin.Token)
	require.Equal(t, http.StatusOK, rr.status, rr.body)
	var rot api.RotateResponse
	rr.decode(t, &rot)

	after := p.mustExchange(t, "t1", idp.token(t, "alice", []string{"Felix.Writer"}, nil))
	jw := p.main.doToken(t, "GET", "/v1/tenants/t1/.well-known/jwks.json", "", "")
	var set struct{ Keys []struct{ Kid string } }
	require.NoError(t, json.Unmarshal([]byte(jw.body), &set))
	require.Len(t, set.Keys, 2)
	require.Equal(t, rot.KeyID, set.Keys[0].Kid, "current key first")

	v := brokerVerifier(t, p.main.url)
	for _, tok := range []string{before.Token, after.Token, admin.Token} {
		_, err := v.Verify(context.Background(), "t1", tok)
		require.NoError(t, err)
	}
	// The pre-rotation admin token still works on the API too.
	r := p.main.doToken(t, "POST", "/v1/tenants/t1/namespaces", `{"namespace":"default"}`, admin.Token)
	require.Equal(t, http.StatusCreated, r.status, r.body)
}

// A token for tenant A cannot touch tenant B, and the private keys never
// show in the API.
func TestFelixTokenTenantIsolation(t *testing.T) {
	idp := newTestIdP(t)
	p := newAuthPlane(t, nil)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("ta", idp.URL))
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("tb", idp.URL))
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants/tb/namespaces", `{"namespace":"default"}`)
	a := p.mustExchange(t, "ta", idp.token(t, "root", []string{"Felix.Admin"}, nil))
	w := p.mustExchange(t, "ta", idp.token(t, "alice", []string{"Felix.Writer"}, nil))

	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/tenants/tb/namespaces", ""},
		{"POST", "/v1/tenants/tb/namespaces", `{"namespace":"x"}`},
		{"DELETE", "/v1/tenants/tb/namespaces/default", ""},
		{"POST", "/v1/tenants/tb/keys/rotate", ""},
		{"GET", "/v1/tenants/tb", ""},
		{"POST", "/v1/tenants", `{"tenant":"tc"}`},
		{"GET", "/v1/changes", ""},
	} {
		r := p.main.doToken(t, tc.method, tc.path, tc.body, a.Token)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", tc.method, tc.path, r.body)
	}
	r := p.main.doToken(t, "POST", "/v1/tenants/ta/namespaces", `{"namespace":"default"}`, w.Token)
	require.Equal(t, http.StatusForbidden, r.status, r.body)
	r = p.main.doToken(t, "POST", "/v1/tenants/ta/namespaces", `{"namespace":"default"}`, a.Token)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	r = p.main.doToken(t, "GET", "/v1/tenants/ta/namespaces", "", w.Token)
	require.Equal(t, http.StatusOK, r.status, r.body)
	r = p.main.doToken(t, "GET", "/v1/tenants/ta/namespaces", "", "garbage")
	require.Equal(t, http.StatusUnauthorized, r.status, r.body)
	require.Contains(t, r.body, "felix token rejected (malformed)")
	// The bootstrap token is no credential on the main listener.
	r = p.main.doToken(t, "GET", "/v1/tenants/ta/namespaces", "", testToken)
	require.Equal(t, http.StatusUnauthorized, r.status, r.body)

	for _, path := range []string{"/v1/changes", "/v1/snapshot", "/v1/tenants", "/v1/tenants/ta"} {
		body := p.boot.mustDo(t, http.StatusOK, "GET", path, "").body
		require.NotContains(t, body, "Private", path)
		require.NotContains(t, body, string(KindTenantKeys), path)
	}
	ks, err := p.tokens.minter.Keys("ta")
	require.NoError(t, err)
	require.NotEmpty(t, ks.Current.Private)
}
