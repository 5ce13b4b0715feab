package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/testutil"
	"github.com/felixmq/felix/wire"
)

// testBootstrap is jwksControlPlane's bootstrap token.
const testBootstrap = "bootstrap-token-for-the-test-0123456789"

// jwksControlPlane is a control plane (memory store, bootstrap token) that
// also serves the tenant keys of minter, as a real one serves its own, with
// the tenants given, each with namespace ns. post creates what it is given
// there with the bootstrap token.
func jwksControlPlane(t *testing.T, minter *auth.Minter, ns string, tenants ...string) (url, tokenFile string, post func(path, body string)) {
	const bootstrap = testBootstrap
	authz, err := controlplane.NewBootstrapAuthorizer(bootstrap)
	require.NoError(t, err)
	cp, err := controlplane.New(controlplane.Config{Authorizer: authz})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/tenants/{tenant}/.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		jwks, err := minter.JWKS(r.PathValue("tenant"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Write(jwks)
	})
	mux.Handle("/", cp)
	srv := httptest.NewServer(mux)
	// Close ends the broker's pending long-poll, which srv.Close waits for.
	t.Cleanup(func() { cp.Close(); srv.Close() })
	post = func(path, body string) {
		code, reply := testutil.Call(t, http.MethodPost, srv.URL+path, body, bootstrap)
		require.Equal(t, http.StatusCreated, code, "%s: %s", path, reply)
	}
	for _, tn := range tenants {
		require.NoError(t, minter.AddTenant(tn))
		post("/v1/tenants", `{"tenant":"`+tn+`"}`)
		post("/v1/tenants/"+tn+"/namespaces", `{"tenant":"`+tn+`","namespace":"`+ns+`"}`)
	}
	tokenFile = filepath.Join(t.TempDir(), "cp-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(bootstrap+"\n"), 0o600))
	return srv.URL, tokenFile, post
}

func (bp *brokerProcess) clientTLS(t *testing.T) *tls.Config {
	pem, err := os.ReadFile(bp.cert)
	require.NoError(t, err)
	pool, err := devtls.Pool(pem)
	require.NoError(t, err)
	return &tls.Config{RootCAs: pool}
}

// TestForeignAdminCannotOpenForwardedStream is the cross-tenant attack on a
// broker that follows a control plane: an admin token of tenant t2 in an
// auth frame that claims t1 and the forwarded capability was taken as a
// node credential (verified with t2's own keys, admin accepted for
// cluster.node) and given a principal of the claimed t1 without expiry, so
// t2 published into t1's streams. The stream is now refused, the refusal
// logged, and nothing reaches t1's subscriber; t1's own writer is served.
func TestForeignAdminCannotOpenForwardedStream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process against a control plane")
	}
	minter, err := auth.NewMinter(auth.MinterConfig{TTL: 10 * time.Second})
	require.NoError(t, err)
	url, tokenFile, _ := jwksControlPlane(t, minter, "default", "t1", "t2")
	bp := startBrokerProcess(t, "FELIX_CONTROLPLANE_URL="+url, "FELIX_CONTROLPLANE_TOKEN_FILE="+tokenFile,
		"FELIX_STREAMS=t1/default/orders")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tlsConf := bp.clientTLS(t)
	dial := func(tenant, token string, flags wire.Flags) *client.Client {
		c, err := client.Dial(ctx, bp.addr, client.Config{Tenant: tenant, Token: token, TLS: tlsConf, Flags: flags})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	t1, _, err := minter.Mint("t1", "t1-app", []auth.Permission{{Action: auth.ActionAdmin, Resource: "t1/*/*"}})
	require.NoError(t, err)
	sub, err := dial("t1", t1, 0).Subscribe(ctx, "default", "orders", client.SubscribeOptions{})
	require.NoError(t, err)

	t2, _, err := minter.Mint("t2", "intruder", []auth.Permission{{Action: auth.ActionAdmin, Resource: "t2/*/*"}})
	require.NoError(t, err)
	_, err = client.Dial(ctx, bp.addr, client.Config{Tenant: "t1", Token: t2, TLS: tlsConf, Flags: wire.KnownCapabilities | wire.CapForwarded})
	require.ErrorIs(t, err, client.ErrAuth)
	require.ErrorContains(t, err, "forwarded stream needs a node credential")

	pub, err := dial("t1", t1, 0).NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, []byte("own")))
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "own", string(ev.Payload), "the first event t1 sees is its own")
	require.Eventually(t, func() bool {
		return containsAll(bp.log.text(), "auth refused", "forwarded=true", "tenant=t1")
	}, 5*time.Second, 10*time.Millisecond, "the refusal is logged")
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestNodeVerifierTakesOnlyOperatorNodeCredentials: in cluster mode a
// forwarded stream's token must be a node credential (cluster.node) of the
// operator tenant; a node-shaped or admin token of another tenant, and the
// operator's own admin token, are refused. The accepted credential carries
// its expiry (plus the tolerated skew), which ends the stream.
func TestNodeVerifierTakesOnlyOperatorNodeCredentials(t *testing.T) {
	minter, err := auth.NewMinter(auth.MinterConfig{TTL: time.Minute})
	require.NoError(t, err)
	for _, tn := range []string{"ops", "t2"} {
		require.NoError(t, minter.AddTenant(tn))
	}
	v, err := auth.NewVerifier(auth.VerifierConfig{Keys: minter, ClockSkew: tokenClockSkew})
	require.NoError(t, err)
	verify := nodeVerifier(v, "ops")
	mint := func(tenant string, a auth.Action) string {
		tok, _, err := minter.Mint(tenant, "b7", []auth.Permission{{Action: a, Resource: tenant + "/*/*"}})
		require.NoError(t, err)
		return tok
	}
	ctx := context.Background()
	cred, err := verify(ctx, mint("ops", auth.ActionClusterNode))
	require.NoError(t, err)
	require.Equal(t, "b7", cred.Subject)
	require.WithinDuration(t, time.Now().Add(time.Minute+tokenClockSkew), cred.Expiry, 2*time.Second)
	for name, tok := range map[string]string{
		"another tenant's node credential": mint("t2", auth.ActionClusterNode),
		"another tenant's admin":           mint("t2", auth.ActionAdmin),
		"the operator's admin":             mint("ops", auth.ActionAdmin),
		"garbage":                          "x.y.z",
	} {
		_, err := verify(ctx, tok)
		require.Error(t, err, name)
	}
}

// TestAuthRefusalHidesInternalURLs: a token whose kid the tenant's keys do
// not have was refused with the control plane's internal JWKS URL in the
// message, shown to a peer that has not authenticated. The peer now gets
// the reason without the URL; the broker's log keeps it.
func TestAuthRefusalHidesInternalURLs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process against a control plane")
	}
	minter, err := auth.NewMinter(auth.MinterConfig{})
	require.NoError(t, err)
	url, tokenFile, _ := jwksControlPlane(t, minter, "default", "t1")
	bp := startBrokerProcess(t, "FELIX_CONTROLPLANE_URL="+url, "FELIX_CONTROLPLANE_TOKEN_FILE="+tokenFile, "FELIX_STREAMS=t1/default/orders")
	stranger, err := auth.NewMinter(auth.MinterConfig{}) // same tenant name, keys the control plane never published
	require.NoError(t, err)
	require.NoError(t, stranger.AddTenant("t1"))
	tok, _, err := stranger.Mint("t1", "x", []auth.Permission{{Action: auth.ActionPublish, Resource: "t1/*/*"}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = client.Dial(ctx, bp.addr, client.Config{Tenant: "t1", Token: tok, TLS: bp.clientTLS(t)})
	require.ErrorIs(t, err, client.ErrAuth)
	require.ErrorContains(t, err, "unknown_key")
	require.NotContains(t, err.Error(), "://")
	require.NotContains(t, err.Error(), strings.TrimPrefix(url, "http://"))
	require.Eventually(t, func() bool { return strings.Contains(bp.log.text(), url+"/v1/tenants/t1/.well-known/jwks.json") },
		5*time.Second, 10*time.Millisecond, "the log keeps the URL")
}
