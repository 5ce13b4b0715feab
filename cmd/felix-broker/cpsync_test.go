package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/client"
)

// TestBrokerFollowsControlPlane: a broker process started with
// FELIX_CONTROLPLANE_URL serves a stream created at the control plane
// within a second of its creation, and verifies Felix tokens with the tenant
// keys the control plane publishes (served here next to the real control
// plane API by the test, from an auth.Minter). A token without a tenant the
// control plane knows is refused.
func TestBrokerFollowsControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process against a control plane")
	}
	minter, err := auth.NewMinter(auth.MinterConfig{})
	require.NoError(t, err)
	url, tokenFile, cpPost := jwksControlPlane(t, minter, "prod", "acme")
	bp := startBrokerProcess(t, "FELIX_CONTROLPLANE_URL="+url, "FELIX_CONTROLPLANE_TOKEN_FILE="+tokenFile, "FELIX_STREAMS=")

	created := time.Now()
	cpPost("/v1/tenants/acme/namespaces/prod/streams", `{"tenant":"acme","namespace":"prod","stream":"orders","shards":1}`)
	tok, _, err := minter.Mint("acme", "svc", []auth.Permission{{Action: auth.ActionPublish, Resource: "acme/prod/*"}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, bp.addr, client.Config{Tenant: "acme", Token: tok, TLS: bp.clientTLS(t)})
	require.NoError(t, err)
	defer c.Close()
	pub, err := c.NewPublisher(ctx, "prod", "orders")
	require.NoError(t, err, "the token verifies with the control plane's tenant keys")
	require.Eventually(t, func() bool { return pub.Publish(ctx, []byte("x")) == nil }, 5*time.Second, 10*time.Millisecond)
	learned := time.Since(created)
	t.Logf("stream created at the control plane was served %v later", learned)
	require.Less(t, learned, time.Second)

	// A tenant the control plane does not have: refused without a fetch.
	other, err := auth.NewMinter(auth.MinterConfig{})
	require.NoError(t, err)
	require.NoError(t, other.AddTenant("ghost"))
	gtok, _, err := other.Mint("ghost", "svc", []auth.Permission{{Action: auth.ActionPublish, Resource: "ghost/prod/*"}})
	require.NoError(t, err)
	g, err := client.Dial(ctx, bp.addr, client.Config{Tenant: "ghost", Token: gtok, TLS: bp.clientTLS(t)})
	require.NoError(t, err)
	defer g.Close()
	_, err = g.NewPublisher(ctx, "prod", "orders")
	require.ErrorIs(t, err, client.ErrAuth)
	require.ErrorContains(t, err, "tenant")
}
