package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
)

// A Watcher keeps its last placement through a control plane outage
// (503s), backs off, and catches up with the changes made meanwhile once
// the control plane answers again; OnChange sees each version once, in
// order.
func TestWatcherReconnects(t *testing.T) {
	p := newPlane(t, 5*time.Second)
	target, err := url.Parse(p.url)
	require.NoError(t, err)
	var down atomic.Bool
	var failed atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			failed.Add(1)
			http.Error(w, `{"code":"unavailable","message":"down for the test"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	var versions []int64
	seen := make(chan int64, 100)
	w, err := api.NewWatcher(api.WatcherConfig{URL: front.URL, Token: token, Wait: 200 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		OnChange: func(x *cluster.Index) { seen <- x.Version }})
	require.NoError(t, err)
	defer w.Close()
	p.stream(t, "s", 2, false)
	p.agent(t, "b1")
	first := until(t, w, 5*time.Second, func(x *cluster.Index) bool { return owners(x)["b1"] == 2 })

	down.Store(true)
	// The long poll in flight when the proxy went down ends normally; only
	// once a request has been refused does the watcher see nothing more.
	require.Eventually(t, func() bool { return failed.Load() >= 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, first.Version, w.Current().Version)
	p.agent(t, "b2") // changes the placement while the watcher cannot see it
	require.Eventually(t, func() bool { return failed.Load() >= 3 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, first.Version, w.Current().Version, "the last placement stays current during the outage")
	down.Store(false)
	until(t, w, 5*time.Second, func(x *cluster.Index) bool { return owners(x)["b2"] == 1 })

	w.Close()
	close(seen)
	for v := range seen {
		versions = append(versions, v)
	}
	for i := 1; i < len(versions); i++ {
		require.Greater(t, versions[i], versions[i-1], "OnChange sees each version once, in order: %v", versions)
	}
}

// NewAgent fails at once on a wrong credential, matching ErrUnauthorized.
func TestAgentRefusedCredential(t *testing.T) {
	p := newPlane(t, time.Second)
	_, err := api.NewAgent(context.Background(), api.AgentConfig{URL: p.url, Token: "wrong-token-0123456789",
		Member: cluster.Member{ID: "b1", QUICAddr: "127.0.0.1:7000"}})
	require.ErrorIs(t, err, api.ErrUnauthorized)
	var apiErr *api.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, "unauthenticated", apiErr.Code)
}

// nodeTokenPlanes serves one control plane minting tokens of ttl twice:
// the bootstrap plane takes the bootstrap token too, main only Felix
// tokens. mint mints a node credential for subject on the bootstrap one.
func nodeTokenPlanes(t *testing.T, ttl time.Duration) (main *plane, mint func(subject string) api.NodeTokenResponse) {
	t.Helper()
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	require.NoError(t, err)
	tokens, err := controlplane.NewTokens(st, controlplane.TokensConfig{Minter: auth.MinterConfig{TTL: ttl}})
	require.NoError(t, err)
	placer, err := controlplane.NewPlacer(st, controlplane.PlacerConfig{LeaseTTL: 600 * time.Millisecond})
	require.NoError(t, err)
	felix, err := controlplane.NewFelixTokenAuthorizer(controlplane.FelixTokenConfig{Keys: tokens, OperatorTenant: "ops"})
	require.NoError(t, err)
	boot, err := controlplane.NewBootstrapAuthorizer(token)
	require.NoError(t, err)
	serve := func(a controlplane.Authorizer) *plane {
		srv, err := controlplane.New(controlplane.Config{Store: st, Authorizer: a, Tokens: tokens, Placer: placer, OperatorTenant: "ops"})
		require.NoError(t, err)
		hs := httptest.NewServer(srv)
		t.Cleanup(func() { hs.Close(); srv.Close() })
		return &plane{url: hs.URL, store: st}
	}
	bootPlane, main := serve(controlplane.AnyOf{boot, felix}), serve(felix)
	t.Cleanup(func() { placer.Close(); st.Close() })
	bootPlane.call(t, 201, "POST", "/v1/tenants", `{"tenant":"ops"}`)
	return main, func(subject string) api.NodeTokenResponse {
		var node api.NodeTokenResponse
		require.NoError(t, json.Unmarshal([]byte(bootPlane.call(t, 200, "POST", "/v1/token/node", `{"subject":"`+subject+`"}`)), &node))
		return node
	}
}

// renewingAgent registers member b1 on main with tok and RenewToken.
func renewingAgent(t *testing.T, main *plane, tok string) *api.Agent {
	t.Helper()
	a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: main.url, Token: tok, RenewToken: true,
		Member: cluster.Member{ID: "b1", QUICAddr: "127.0.0.1:7000"}})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

// With RenewToken, an Agent holding a node credential minted on the
// bootstrap listener renews it through the main listener before it
// expires, and a Watcher reading with Agent.Token follows.
func TestAgentRenewsNodeCredential(t *testing.T) {
	main, mint := nodeTokenPlanes(t, 2*time.Second)
	node := mint("broker-1")
	a := renewingAgent(t, main, node.Token)
	w, err := api.NewWatcher(api.WatcherConfig{URL: main.url, TokenFunc: a.Token, Wait: time.Second})
	require.NoError(t, err)
	defer w.Close()
	require.Eventually(t, func() bool { return a.Token() != node.Token }, 5*time.Second, 20*time.Millisecond,
		"the credential is renewed half-way through its 2s life")
	x := until(t, w, 5*time.Second, func(x *cluster.Index) bool { return len(x.Members) == 1 })
	require.Equal(t, "b1", x.Members[0].ID)
}

// A credential rotated from outside (the broker's token file) replaces the
// Agent's own: the Agent presents it and renews it, not the one it had.
// One that cannot be renewed (not a JWT) is refused and changes nothing.
func TestAgentAdoptsRotatedCredential(t *testing.T) {
	main, mint := nodeTokenPlanes(t, 2*time.Second)
	first := mint("broker-1")
	a := renewingAgent(t, main, first.Token)

	require.ErrorIs(t, a.Adopt("an-opaque-secret"), api.ErrInvalid)
	require.Equal(t, first.Token, a.Token())

	rotated := mint("broker-2")
	require.NoError(t, a.Adopt(rotated.Token))
	require.Equal(t, rotated.Token, a.Token())
	// Renewed half-way through the adopted credential's life, for its
	// subject: the renewed token names broker-2.
	require.Eventually(t, func() bool { return a.Token() != rotated.Token }, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, "broker-2", tokenSubject(t, a.Token()))
	w, err := api.NewWatcher(api.WatcherConfig{URL: main.url, TokenFunc: a.Token, Wait: time.Second})
	require.NoError(t, err)
	defer w.Close()
	x := until(t, w, 5*time.Second, func(x *cluster.Index) bool { return len(x.Members) == 1 })
	require.Equal(t, "b1", x.Members[0].ID)
}

// tokenSubject reads the sub claim of a JWT without verifying it.
func tokenSubject(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Sub string `json:"sub"`
	}
	require.NoError(t, json.Unmarshal(raw, &claims))
	return claims.Sub
}
