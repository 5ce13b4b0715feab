package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/testutil"
	"github.com/felixmq/felix/segment"
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	acmePublisher(ctx, t, bp, minter, "orders") // the token verifies with the control plane's tenant keys
	learned := time.Since(created)
	t.Logf("stream created at the control plane was served %v later", learned)
	require.Less(t, learned, time.Second)

	// A tenant the control plane does not have: refused without a fetch.
	other, err := auth.NewMinter(auth.MinterConfig{})
	require.NoError(t, err)
	require.NoError(t, other.AddTenant("ghost"))
	gtok, _, err := other.Mint("ghost", "svc", []auth.Permission{{Action: auth.ActionPublish, Resource: "ghost/prod/*"}})
	require.NoError(t, err)
	_, err = client.Dial(ctx, bp.addr, client.Config{Tenant: "ghost", Token: gtok, TLS: bp.clientTLS(t)})
	require.ErrorIs(t, err, client.ErrAuth)
	require.ErrorContains(t, err, "tenant")
}

// TestControlPlaneDeletionAppliesWithoutRestart: a durable stream deleted
// at the control plane was "not applied until restart" (its publishes
// still acked, its disk still held). Now the broker following the control
// plane ends it at once: publishes are refused and its shard directory is
// gone.
func TestControlPlaneDeletionAppliesWithoutRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process against a control plane")
	}
	minter, err := auth.NewMinter(auth.MinterConfig{})
	require.NoError(t, err)
	url, tokenFile, cpPost := jwksControlPlane(t, minter, "prod", "acme")
	data := t.TempDir()
	bp := startBrokerProcess(t, "FELIX_CONTROLPLANE_URL="+url, "FELIX_CONTROLPLANE_TOKEN_FILE="+tokenFile, "FELIX_STREAMS=",
		"FELIX_DATA_DIR="+data)
	cpPost("/v1/tenants/acme/namespaces/prod/streams", `{"tenant":"acme","namespace":"prod","stream":"jobs","shards":1,"durable":true,"fsync":"on_commit"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub := acmePublisher(ctx, t, bp, minter, "jobs")
	shardDir := filepath.Join(data, segment.ShardDirName("acme", "prod", "jobs", 0))
	require.DirExists(t, shardDir)

	code, body := testutil.Call(t, http.MethodDelete, url+"/v1/tenants/acme/namespaces/prod/streams/jobs", "", testBootstrap)
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool {
		err := pub.Publish(ctx, []byte("after"))
		return err != nil && strings.Contains(err.Error(), "stream not found")
	}, 5*time.Second, 10*time.Millisecond, "publishes are refused once the deletion is applied")
	require.Eventually(t, func() bool { return !exists(shardDir) }, 5*time.Second, 10*time.Millisecond, "the shard's files are removed")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// acmePublisher dials bp with a token of tenant acme that may publish to
// acme/prod/*, and returns a publisher to stream once it has published
// (the broker learns the stream from the control plane's feed).
func acmePublisher(ctx context.Context, t *testing.T, bp *brokerProcess, minter *auth.Minter, stream string) *client.Publisher {
	tok, _, err := minter.Mint("acme", "svc", []auth.Permission{{Action: auth.ActionPublish, Resource: "acme/prod/*"}})
	require.NoError(t, err)
	c, err := client.Dial(ctx, bp.addr, client.Config{Tenant: "acme", Token: tok, TLS: bp.clientTLS(t)})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	pub, err := c.NewPublisher(ctx, "prod", stream)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return pub.Publish(ctx, []byte("x")) == nil }, 5*time.Second, 10*time.Millisecond)
	return pub
}
