package controlplane

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

var testIdPKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// testIdP is a real identity provider over HTTP: a JWKS with one RSA key
// that has no alg member (as Microsoft Entra ID publishes), and RS256
// tokens signed with it.
type testIdP struct {
	*httptest.Server
	key    *rsa.PrivateKey
	kid    string
	issuer string
}

const testAudience = "api://felix"

func newTestIdP(t testing.TB) *testIdP {
	p := &testIdP{key: testIdPKey(), kid: "entra-kid-1"}
	jwk, err := json.Marshal(jose.JSONWebKey{Key: &p.key.PublicKey, KeyID: p.kid, Use: "sig"})
	require.NoError(t, err)
	require.NotContains(t, string(jwk), `"alg"`)
	body := []byte(`{"keys":[` + string(jwk) + `]}`)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(p.Close)
	p.issuer = p.URL + "/v2.0"
	return p
}

// token signs an RS256 IdP token for sub with roles; edit adjusts claims.
func (p *testIdP) token(t testing.TB, sub string, roles []string, edit func(map[string]any)) string {
	now := time.Now()
	c := map[string]any{"iss": p.issuer, "aud": testAudience, "sub": sub, "roles": roles,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", p.kid))
	require.NoError(t, err)
	raw, err := jwt.Signed(s).Claims(c).Serialize()
	require.NoError(t, err)
	return raw
}

// forged builds a token with any header, MACed with secret (nil: no
// signature, as for alg none).
func (p *testIdP) forged(t testing.TB, header map[string]any, secret []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(map[string]any{"iss": p.issuer, "aud": testAudience, "sub": "mallory",
		"roles": []string{"Felix.Writer"}, "exp": time.Now().Add(time.Hour).Unix()})
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	if secret == nil {
		return in + "."
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (p *testIdP) publicDER(t testing.TB) []byte {
	b, err := x509.MarshalPKIXPublicKey(&p.key.PublicKey)
	require.NoError(t, err)
	return b
}

// tenantBody is a tenant creation body trusting this IdP with jwksURL: a
// writer role (publish and subscribe on every stream of namespace
// default) and a reader role (subscribe only).
func (p *testIdP) tenantBody(tenant, jwksURL string) string {
	idp := api.TenantIdP{
		Issuer: p.issuer, JWKSURL: jwksURL, Audiences: []string{testAudience},
		Roles: map[string][]auth.Permission{
			"writer": {{Action: "stream.publish", Resource: tenant + "/default/*"}, {Action: "stream.subscribe", Resource: tenant + "/default/*"}},
			"reader": {{Action: "stream.subscribe", Resource: tenant + "/default/*"}},
			"admin":  {{Action: "admin", Resource: tenant + "/*/*"}},
		},
		Bindings: map[string][]string{"Felix.Writer": {"writer"}, "Felix.Reader": {"reader"}, "Felix.Admin": {"admin"}},
	}
	b, _ := json.Marshal(api.Tenant{Tenant: tenant, IdP: &idp})
	return string(b)
}
