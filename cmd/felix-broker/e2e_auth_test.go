package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/devtls"
)

// rsaIdP is a real local identity provider: it serves a JWKS whose RSA
// key has no "alg" member (as Microsoft Entra ID does) and signs RS256
// tokens.
type rsaIdP struct {
	*httptest.Server
	key *rsa.PrivateKey
}

func newRSAIdP(t *testing.T) *rsaIdP {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	p := &rsaIdP{key: key}
	jwk, err := json.Marshal(jose.JSONWebKey{Key: &key.PublicKey, KeyID: "idp-1", Use: "sig"})
	require.NoError(t, err)
	require.NotContains(t, string(jwk), `"alg"`)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys":[` + string(jwk) + `]}`))
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *rsaIdP) token(t *testing.T, sub string, roles ...string) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "idp-1"))
	require.NoError(t, err)
	now := time.Now()
	raw, err := jwt.Signed(s).Claims(map[string]any{"iss": p.URL, "aud": "api://felix", "sub": sub, "roles": roles,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}).Serialize()
	require.NoError(t, err)
	return raw
}

// TestEndToEndAuth is the auth path end to end on the real broker binary
// following a real control plane, with a real identity provider: IdP token
// exchanged for a Felix token; publish and subscribe allowed by role; an
// operation outside the role refused with forbidden; a live stream closed
// at its token's expiry and the expired token refused; the tenant key
// rotated with old and new tokens both verifying; a tenant's token unable to
// touch another tenant.
func TestEndToEndAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a control plane and a broker process")
	}
	idp := newRSAIdP(t)
	const bootstrap = "bootstrap-token-for-the-e2e-test-0123456789"
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	require.NoError(t, err)
	ttl := 3 * time.Second // expiry is part of the test
	tokens, err := controlplane.NewTokens(st, controlplane.TokensConfig{Minter: auth.MinterConfig{TTL: ttl, ClockSkew: time.Millisecond}})
	require.NoError(t, err)
	boot, err := controlplane.NewBootstrapAuthorizer(bootstrap)
	require.NoError(t, err)
	felix, err := controlplane.NewFelixTokenAuthorizer(controlplane.FelixTokenConfig{Keys: tokens})
	require.NoError(t, err)
	cp, err := controlplane.New(controlplane.Config{Store: st, Authorizer: controlplane.AnyOf{boot, felix}, Tokens: tokens})
	require.NoError(t, err)
	srv := httptest.NewServer(cp)
	defer func() { cp.Close(); srv.Close(); st.Close() }()
	call := cpCaller(t, srv.URL)
	for _, tenant := range []string{"t1", "t2"} {
		idpConf := `{"issuer":"` + idp.URL + `","jwks_url":"` + idp.URL + `","audiences":["api://felix"],` +
			`"roles":{"writer":[{"action":"stream.publish","resource":"` + tenant + `/default/*"},{"action":"stream.subscribe","resource":"` + tenant + `/default/*"}],` +
			`"reader":[{"action":"stream.subscribe","resource":"` + tenant + `/default/*"}]},` +
			`"bindings":{"Felix.Writer":["writer"],"Felix.Reader":["reader"]}}`
		code, body := call(http.MethodPost, "/v1/tenants", `{"tenant":"`+tenant+`","idp":`+idpConf+`}`, bootstrap)
		require.Equal(t, http.StatusCreated, code, body)
		code, body = call(http.MethodPost, "/v1/tenants/"+tenant+"/namespaces", `{"tenant":"`+tenant+`","namespace":"default"}`, bootstrap)
		require.Equal(t, http.StatusCreated, code, body)
		code, body = call(http.MethodPost, "/v1/tenants/"+tenant+"/namespaces/default/streams",
			`{"tenant":"`+tenant+`","namespace":"default","stream":"orders","shards":1}`, bootstrap)
		require.Equal(t, http.StatusCreated, code, body)
	}
	exchange := func(tenant, idpToken string) string {
		code, body := call(http.MethodPost, "/v1/token/exchange", `{"tenant":"`+tenant+`","idp_token":"`+idpToken+`"}`, "")
		require.Equal(t, http.StatusOK, code, body)
		var r api.ExchangeResponse
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		return r.Token
	}

	tokenFile := filepath.Join(t.TempDir(), "cp-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(bootstrap), 0o600))
	bp := startBrokerProcess(t, "FELIX_CONTROLPLANE_URL="+srv.URL, "FELIX_CONTROLPLANE_TOKEN_FILE="+tokenFile, "FELIX_STREAMS=", "FELIX_CACHES=")
	pem, err := os.ReadFile(bp.cert)
	require.NoError(t, err)
	pool, err := devtls.Pool(pem)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(tenant, token string) *client.Client {
		c, err := client.Dial(ctx, bp.addr, client.Config{Tenant: tenant, Token: token, TLS: &tls.Config{RootCAs: pool}})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Writer: publish and subscribe.
	writer := dial("t1", exchange("t1", idp.token(t, "alice", "Felix.Writer")))
	sub, err := writer.Subscribe(ctx, "default", "orders", client.SubscribeOptions{})
	require.NoError(t, err)
	pub, err := writer.NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, []byte("hello")))
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "hello", string(ev.Payload))

	// Reader: subscribing works, publishing is forbidden and says why.
	reader := dial("t1", exchange("t1", idp.token(t, "bob", "Felix.Reader")))
	_, err = reader.Subscribe(ctx, "default", "orders", client.SubscribeOptions{})
	require.NoError(t, err)
	rpub, err := reader.NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	err = rpub.Publish(ctx, []byte("nope"))
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Contains(t, be.Message, "forbidden")
	require.Contains(t, be.Message, "stream.publish")

	// A t1 token cannot touch t2: Dial, which authenticates, says so.
	_, err = client.Dial(ctx, bp.addr, client.Config{Tenant: "t2", Token: exchange("t1", idp.token(t, "alice", "Felix.Writer")),
		TLS: &tls.Config{RootCAs: pool}})
	require.ErrorIs(t, err, client.ErrAuth)

	// Rotation: tokens minted before it keep working; new ones verify too.
	old := exchange("t1", idp.token(t, "carol", "Felix.Writer"))
	code, body := call(http.MethodPost, "/v1/tenants/t1/keys/rotate", "", bootstrap)
	require.Equal(t, http.StatusOK, code, body)
	fresh := exchange("t1", idp.token(t, "carol", "Felix.Writer"))
	for _, tok := range []string{old, fresh} {
		require.Eventually(t, func() bool { // the broker refetches the JWKS for the new kid
			c, err := client.Dial(ctx, bp.addr, client.Config{Tenant: "t1", Token: tok, TLS: &tls.Config{RootCAs: pool}})
			if err != nil {
				return false
			}
			defer c.Close()
			p, err := c.NewPublisher(ctx, "default", "orders")
			return err == nil && p.Publish(ctx, []byte("after rotation")) == nil
		}, 10*time.Second, 100*time.Millisecond)
	}

	// Expiry: the live subscription of the first token is closed with the
	// auth code, and the expired token is refused at auth.
	writerToken := exchange("t1", idp.token(t, "dave", "Felix.Writer"))
	w2 := dial("t1", writerToken)
	live, err := w2.Subscribe(ctx, "default", "orders", client.SubscribeOptions{})
	require.NoError(t, err)
	for {
		if _, err = live.Next(ctx); err != nil {
			break
		}
	}
	var se *quic.StreamError
	require.True(t, errors.As(err, &se), "ended by the broker: %v", err)
	require.EqualValues(t, 0x11, se.ErrorCode)
	_, err = client.Dial(ctx, bp.addr, client.Config{Tenant: "t1", Token: writerToken, TLS: &tls.Config{RootCAs: pool}})
	require.ErrorIs(t, err, client.ErrAuth)
	require.ErrorContains(t, err, "expired")
}
