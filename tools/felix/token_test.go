package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
)

const cpBootstrapToken = "bootstrap-token-for-cli-tests-0123"

// cliIdP is a real IdP: a JWKS with an RSA key lacking alg, RS256 tokens.
type cliIdP struct {
	*httptest.Server
	key *rsa.PrivateKey
}

func newCLIIdP(t *testing.T) *cliIdP {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	jwk, err := json.Marshal(jose.JSONWebKey{Key: &k.PublicKey, KeyID: "k1", Use: "sig"})
	require.NoError(t, err)
	p := &cliIdP{key: k}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys":[` + string(jwk) + `]}`))
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *cliIdP) token(t *testing.T, roles []string, exp time.Time) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	require.NoError(t, err)
	raw, err := jwt.Signed(s).Claims(map[string]any{"iss": p.URL, "aud": "api://felix", "sub": "alice",
		"roles": roles, "iat": time.Now().Unix(), "exp": exp.Unix()}).Serialize()
	require.NoError(t, err)
	return raw
}

// startCP serves a control plane like the bootstrap listener (bootstrap or
// Felix token, and the development issuer).
func startCP(t *testing.T) string {
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	require.NoError(t, err)
	tokens, err := controlplane.NewTokens(st, controlplane.TokensConfig{})
	require.NoError(t, err)
	felix, err := controlplane.NewFelixTokenAuthorizer(controlplane.FelixTokenConfig{Keys: tokens})
	require.NoError(t, err)
	boot, err := controlplane.NewBootstrapAuthorizer(cpBootstrapToken)
	require.NoError(t, err)
	srv, err := controlplane.New(controlplane.Config{Store: st, Tokens: tokens, Authorizer: controlplane.AnyOf{boot, felix}, DevIssuer: boot})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close(); st.Close() })
	return hs.URL
}

func TestTokenExchangeAndAdmin(t *testing.T) {
	idp := newCLIIdP(t)
	cp := startCP(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	bootFile := write("boot", cpBootstrapToken+"\n")
	idpCfg := write("idp.json", `{"issuer":"`+idp.URL+`","jwks_url":"`+idp.URL+`","audiences":["api://felix"],
		"roles":{"admin":[{"action":"admin","resource":"t1/*/*"}]},"bindings":{"Felix.Admin":["admin"]}}`)

	code, out, stderr := runCLI("admin", "tenant", "create", "t1", "--idp-file", idpCfg, "--controlplane", cp, "--token-file", bootFile)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, `"tenant": "t1"`)

	idpTok := write("idp.jwt", idp.token(t, []string{"Felix.Admin"}, time.Now().Add(time.Hour)))
	felixFile := filepath.Join(dir, "felix.jwt")
	code, out, stderr = runCLI("token", "exchange", "--controlplane", cp, "--tenant", "t1", "--idp-token", idpTok, "--out", felixFile)
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, "expires_at")
	code, out, _ = runCLI("token", "exchange", "--controlplane", cp, "--tenant", "t1", "--idp-token", idpTok)
	require.Equal(t, exitOK, code)
	require.Regexp(t, `^ey[^.]+\.[^.]+\.[^.]+\n$`, out)

	// The Felix token administers its tenant.
	code, _, stderr = runCLI("admin", "namespace", "create", "default", "--tenant", "t1", "--controlplane", cp, "--token-file", felixFile)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runCLI("admin", "stream", "create", "orders", "--tenant", "t1", "--namespace", "default", "--shards", "4",
		"--durable", "--controlplane", cp, "--token-file", felixFile)
	require.Equal(t, exitOK, code, stderr)
	code, out, stderr = runCLI("admin", "stream", "list", "--tenant", "t1", "--namespace", "default", "--controlplane", cp, "--token-file", felixFile)
	require.Equal(t, exitOK, code, stderr)
	var list struct{ Streams []api.Stream }
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Streams, 1)
	require.Equal(t, 4, list.Streams[0].Shards)
	code, _, stderr = runCLI("admin", "stream", "delete", "orders", "--tenant", "t1", "--namespace", "default", "--controlplane", cp, "--token-file", felixFile)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runCLI("admin", "tenant", "rotate-keys", "t1", "--controlplane", cp, "--token-file", felixFile)
	require.Equal(t, exitOK, code, stderr)

	// Precise refusals.
	expired := write("old.jwt", idp.token(t, []string{"Felix.Admin"}, time.Now().Add(-time.Hour)))
	code, _, stderr = runCLI("token", "exchange", "--controlplane", cp, "--tenant", "t1", "--idp-token", expired)
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "401 expired")
	code, _, stderr = runCLI("admin", "tenant", "create", "t2", "--controlplane", cp, "--token-file", felixFile)
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "403 forbidden")
	code, _, stderr = runCLI("admin", "namespace", "list", "--tenant", "t1", "--controlplane", cp)
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "401 unauthenticated")
	code, _, stderr = runCLI("admin", "stream", "list", "--tenant", "t1", "--namespace", "", "--controlplane", cp)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "needs --tenant and --namespace")
	code, _, stderr = runCLI("token", "exchange", "--controlplane", cp, "--tenant", "t1")
	require.Equal(t, exitUsage, code, stderr)
}

// felix token mint asks the development issuer for exactly the rights
// named, defaulting a grant's resource to the whole tenant; the token it
// writes administers nothing it was not given.
func TestTokenMintGrantsWhatItNames(t *testing.T) {
	cp := startCP(t)
	dir := t.TempDir()
	bootFile := filepath.Join(dir, "boot")
	require.NoError(t, os.WriteFile(bootFile, []byte(cpBootstrapToken+"\n"), 0o600))
	code, _, stderr := runCLI("admin", "tenant", "create", "t1", "--controlplane", cp, "--token-file", bootFile)
	require.Equal(t, exitOK, code, stderr)

	out := filepath.Join(dir, "alice.jwt")
	code, _, stderr = runCLI("token", "mint", "--controlplane", cp, "--token-file", bootFile, "--tenant", "t1", "--subject", "alice",
		"--grant", "ns.manage", "--grant", "stream.subscribe:t1/default/orders", "--out", out)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stderr, "expires_at")
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	parts := strings.Split(strings.TrimSpace(string(raw)), ".")
	require.Len(t, parts, 3)
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Tenant string            `json:"tid"`
		Sub    string            `json:"sub"`
		Perms  []json.RawMessage `json:"perms"`
	}
	require.NoError(t, json.Unmarshal(payload, &claims))
	require.Equal(t, "t1", claims.Tenant)
	require.Equal(t, "alice", claims.Sub)
	require.Len(t, claims.Perms, 2)

	code, _, stderr = runCLI("admin", "namespace", "create", "default", "--tenant", "t1", "--controlplane", cp, "--token-file", out)
	require.Equal(t, exitOK, code, "ns.manage on t1/*/* was granted: %s", stderr)
	code, _, stderr = runCLI("admin", "tenant", "rotate-keys", "t1", "--controlplane", cp, "--token-file", out)
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "403 forbidden")

	code, _, stderr = runCLI("token", "mint", "--controlplane", cp, "--token-file", out, "--tenant", "t1", "--subject", "bob", "--grant", "admin")
	require.Equal(t, exitFail, code, "a Felix token cannot mint")
	require.Contains(t, stderr, "401")
	code, _, stderr = runCLI("token", "mint", "--controlplane", cp, "--token-file", bootFile, "--tenant", "t1", "--subject", "bob")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--grant")
}
