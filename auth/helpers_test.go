package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
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
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"
)

// testClock is an injectable clock; tests move it explicitly.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock { return &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Keys are expensive to generate (RSA), so each kind is made once per binary.
var (
	rsaOnce, ecOnce, edOnce sync.Once
	rsaKeys                 [2]*rsa.PrivateKey
	ecKey                   *ecdsa.PrivateKey
	edKey                   ed25519.PrivateKey
)

func testRSA(t testing.TB, i int) *rsa.PrivateKey {
	rsaOnce.Do(func() {
		for j := range rsaKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			require.NoError(t, err)
			rsaKeys[j] = k
		}
	})
	return rsaKeys[i]
}

func testEC(t testing.TB) *ecdsa.PrivateKey {
	ecOnce.Do(func() {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		ecKey = k
	})
	return ecKey
}

func testEd(t testing.TB) ed25519.PrivateKey {
	edOnce.Do(func() {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		edKey = k
	})
	return edKey
}

// jwkJSON renders a public key as a JWK with the given kid and alg ("" leaves
// alg out, as Entra ID does).
func jwkJSON(t testing.TB, pub crypto.PublicKey, kid, alg string) json.RawMessage {
	b, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: alg, Use: "sig"})
	require.NoError(t, err)
	return b
}

func jwksJSON(keys ...json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

// signJWT signs claims with key under alg and kid.
func signJWT(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims any) string {
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	require.NoError(t, err)
	raw, err := jwt.Signed(s).Claims(claims).Serialize()
	require.NoError(t, err)
	return raw
}

// forgeJWT builds a token with an arbitrary header and HMAC-SHA256 over it
// with secret (nil secret: empty signature, as for alg none).
func forgeJWT(header, claims map[string]any, secret []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	if secret == nil {
		return in + "."
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// rsaPublicPEMish is what an attacker would use as an HMAC secret: the
// public key's encoding.
func rsaPublicDER(t testing.TB, pub *rsa.PublicKey) []byte {
	b, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return b
}

// idpServer is a real HTTP JWKS endpoint whose behaviour tests switch.
type idpServer struct {
	*httptest.Server
	fetches      atomic.Int64
	mu           sync.Mutex
	body         []byte
	status       int
	cacheControl string
	gate         chan struct{} // if non-nil, requests wait for it to close
}

func newIdPServer(t testing.TB, body []byte) *idpServer {
	s := &idpServer{body: body, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		body, status, cc, gate := s.body, s.status, s.cacheControl, s.gate
		s.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *idpServer) set(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func (s *idpServer) setCacheControl(cc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cacheControl = cc
}

func (s *idpServer) setGate(g chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = g
}
