package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/testutil"
)

// The real binary with an operator tenant: a node credential minted on the
// bootstrap listener registers a broker on the main listener under
// FELIX_CP_MEMBER_LEASE_MS, and the placement a Watcher follows there
// shows it, then loses it when it leaves.
func TestNodeCredentialRegistersBroker(t *testing.T) {
	_, mainURL, boot := startWithBootstrap(t, "FELIX_CP_OPERATOR_TENANT=ops", "FELIX_CP_MEMBER_LEASE_MS=1500")
	post := func(url, body string) string {
		code, raw := testutil.Call(t, "POST", url, body, token)
		require.Less(t, code, 300, "%s: %s", url, raw)
		return raw
	}
	post(boot+"/v1/tenants", `{"tenant":"ops"}`)
	var node api.NodeTokenResponse
	require.NoError(t, json.Unmarshal([]byte(post(boot+"/v1/token/node", `{"subject":"broker-1"}`)), &node))

	a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: mainURL, Token: node.Token, RenewToken: true,
		Member: cluster.Member{ID: "broker-1", QUICAddr: "127.0.0.1:7443"}})
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, a.LeaseTTL())
	w, err := api.NewWatcher(api.WatcherConfig{URL: mainURL, TokenFunc: a.Token, Wait: 2 * time.Second})
	require.NoError(t, err)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x, err := w.Next(ctx, 0)
	for err == nil && len(x.Members) != 1 {
		x, err = w.Next(ctx, x.Version)
	}
	require.NoError(t, err)
	require.Equal(t, cluster.Member{ID: "broker-1", QUICAddr: "127.0.0.1:7443", Live: true}, x.Members[0])
	require.NoError(t, a.Close())
	for err == nil && len(x.Members) != 0 {
		x, err = w.Next(ctx, x.Version)
	}
	require.NoError(t, err, "the member left")
}
