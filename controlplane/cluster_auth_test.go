package controlplane

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// clusterAuthPlane is a control plane with an operator tenant "ops" and a
// tenant "t1": the bootstrap listener (with the development issuer) and
// the main (Felix tokens) one.
type clusterAuthPlane struct {
	boot, main *instance
	tokens     *Tokens
}

func newClusterAuthPlane(t *testing.T) *clusterAuthPlane {
	st, err := NewMemoryStore(MemoryConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	tokens, err := NewTokens(st, TokensConfig{})
	require.NoError(t, err)
	placer, err := NewPlacer(st, PlacerConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { placer.Close() })
	felix, err := NewFelixTokenAuthorizer(FelixTokenConfig{Keys: tokens, OperatorTenant: "ops"})
	require.NoError(t, err)
	boot, err := NewBootstrapAuthorizer(testToken)
	require.NoError(t, err)
	metrics := NewMetrics() // one per process, as cmd/felix-controlplane's listeners share
	mk := func(a, dev Authorizer) *instance {
		srv, err := New(Config{Store: st, Authorizer: a, DevIssuer: dev, Tokens: tokens, Placer: placer, OperatorTenant: "ops", Metrics: metrics})
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		return &instance{srv: srv, url: newHTTPServer(t, srv)}
	}
	p := &clusterAuthPlane{boot: mk(AnyOf{boot, felix}, boot), main: mk(felix, nil), tokens: tokens}
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", `{"tenant":"ops"}`)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", `{"tenant":"t1"}`)
	return p
}

func (p *clusterAuthPlane) mintNode(t *testing.T, in *instance, token, subject string) reply {
	return in.doToken(t, "POST", "/v1/token/node", `{"subject":"`+subject+`"}`, token)
}

// A node credential minted on the bootstrap listener registers a broker on
// the main listener, reads the placement and the changes feed, and renews
// itself (same subject only); a user token of another tenant reads the placement but cannot
// register; no token is 401.
func TestClusterNodeCredential(t *testing.T) {
	p := newClusterAuthPlane(t)
	r := p.mintNode(t, p.boot, testToken, "broker-1")
	require.Equal(t, http.StatusOK, r.status, r.body)
	var node api.ExchangeResponse
	r.decode(t, &node)
	require.WithinDuration(t, time.Now().Add(15*time.Minute), node.ExpiresAt, time.Minute)
	require.Equal(t, http.StatusUnauthorized, p.mintNode(t, p.main, testToken, "broker-1").status, "the bootstrap token works on its listener only")

	reg := `{"id":"broker-1","quic_addr":"127.0.0.1:7000"}`
	r = p.main.doToken(t, "POST", "/v1/members", reg, node.Token)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, http.StatusOK, p.main.doToken(t, "POST", "/v1/members/broker-1/keepalive", "", node.Token).status)
	require.Equal(t, http.StatusOK, p.main.doToken(t, "GET", "/v1/placement", "", node.Token).status)
	// One credential serves a broker: it follows the feed with it as well.
	require.Equal(t, http.StatusOK, p.main.doToken(t, "GET", "/v1/snapshot", "", node.Token).status)
	require.Equal(t, http.StatusOK, p.main.doToken(t, "GET", "/v1/changes?cursor=0", "", node.Token).status)

	r = p.mintNode(t, p.main, node.Token, "broker-1")
	require.Equal(t, http.StatusOK, r.status, "a node credential renews itself: %s", r.body)
	r = p.mintNode(t, p.main, node.Token, "broker-2")
	require.Equal(t, http.StatusForbidden, r.status, r.body)
	require.Contains(t, r.body, "renews only itself")

	user, _, err := p.tokens.minter.Mint("t1", "alice", []auth.Permission{{Action: auth.ActionSubscribe, Resource: "t1/*/*"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, p.main.doToken(t, "GET", "/v1/placement", "", user).status)
	require.Equal(t, http.StatusOK, p.main.doToken(t, "GET", "/v1/members", "", user).status)
	r = p.main.doToken(t, "POST", "/v1/members", reg, user)
	require.Equal(t, http.StatusForbidden, r.status, r.body)
	require.Equal(t, http.StatusForbidden, p.mintNode(t, p.main, user, "broker-1").status)
	require.Equal(t, http.StatusForbidden, p.main.doToken(t, "GET", "/v1/snapshot", "", user).status, "the feed spans every tenant")

	r = p.main.doToken(t, "GET", "/v1/placement", "", "")
	require.Equal(t, http.StatusUnauthorized, r.status, r.body)
	r = p.main.doToken(t, "GET", "/v1/placement", "", "not.a.jwt")
	require.Equal(t, http.StatusUnauthorized, r.status, r.body)
}

// A client's token reads the placement of its own tenant's shards (every
// member listed); a node credential reads every tenant's.
func TestClusterPlacementScopedToTenant(t *testing.T) {
	p := newClusterAuthPlane(t)
	for _, tenant := range []string{"t1", "ops"} {
		p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants/"+tenant+"/namespaces", `{"namespace":"ns"}`)
		p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants/"+tenant+"/namespaces/ns/streams", `{"stream":"s","shards":3}`)
	}
	p.boot.register(t, "b1")
	all := p.boot.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 6 })

	var node api.ExchangeResponse
	p.mintNode(t, p.boot, testToken, "b1").decode(t, &node)
	user, _, err := p.tokens.minter.Mint("t1", "alice", []auth.Permission{{Action: auth.ActionPublish, Resource: "t1/ns/s"}})
	require.NoError(t, err)
	var got cluster.Placement
	p.main.doToken(t, "GET", "/v1/placement", "", node.Token).decode(t, &got)
	require.Equal(t, all, got)
	p.main.doToken(t, "GET", fmt.Sprintf("/v1/placement?after=%d&wait_ms=1", all.Version), "", user).decode(t, &got)
	require.Equal(t, all.Version, got.Version)
	require.Equal(t, all.Members, got.Members)
	require.Len(t, got.Assignments, 3)
	for _, a := range got.Assignments {
		require.Equal(t, "t1", a.Tenant)
	}
}
