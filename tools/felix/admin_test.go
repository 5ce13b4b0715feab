package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// felix admin stream create takes --replicas and --ack, and the control
// plane's refusal while too few brokers are live is printed as it is;
// stream list shows every stream's replicas and a replicated one's ack.
func TestAdminStreamReplicas(t *testing.T) {
	cp, admin := startAdminCP(t)
	stream := func(args ...string) (int, string, string) {
		return admin(append([]string{"stream"}, append(args, "--tenant", "t1", "--namespace", "ns")...)...)
	}
	code, _, stderr := stream("create", "r", "--durable", "--replicas", "3")
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "stream needs 3 replicas; 0 brokers are live")
	code, _, stderr = stream("create", "r", "--durable", "--replicas", "3", "--ack", "all")
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, `ack "all": want leader or quorum`)
	code, _, _ = stream("create", "r", "--replicas", "three")
	require.Equal(t, exitUsage, code)

	for i := range 3 {
		a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: cp, Token: cpBootstrapToken,
			Member: cluster.Member{ID: fmt.Sprintf("b%d", i), QUICAddr: fmt.Sprintf("127.0.0.1:%d", 7001+i)}})
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
	}
	code, out, stderr := stream("create", "r", "--durable", "--replicas", "3")
	require.Equal(t, exitOK, code, stderr)
	var created api.Stream
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	require.Equal(t, 3, created.Replicas)
	require.Equal(t, api.AckQuorum, created.Ack)
	code, _, stderr = stream("create", "l", "--durable", "--replicas", "3", "--ack", "leader")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = stream("create", "plain", "--durable")
	require.Equal(t, exitOK, code, stderr)
	// No broker is named here (no --admin, $FELIX_ADMIN, context or dev
	// broker): create does not wait 10 s on the default address and warn.
	require.NotContains(t, stderr, "does not serve it")

	code, out, stderr = stream("list")
	require.Equal(t, exitOK, code, stderr)
	var list struct{ Streams []api.Stream }
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	got := map[string]string{}
	for _, s := range list.Streams {
		got[s.Stream] = fmt.Sprintf("%d %s", s.Replicas, s.Ack)
	}
	require.Equal(t, map[string]string{"r": "3 quorum", "l": "3 leader", "plain": "1 "}, got)
	require.Contains(t, out, `"replicas": 1`, "an unreplicated stream shows its one replica")
}

// startAdminCP starts a control plane holding tenant t1 and namespace
// t1/ns, and returns its URL and a felix admin run against it with the
// bootstrap token.
func startAdminCP(t *testing.T) (string, func(args ...string) (int, string, string)) {
	cp := startCP(t)
	boot := filepath.Join(t.TempDir(), "boot.token")
	require.NoError(t, os.WriteFile(boot, []byte(cpBootstrapToken), 0o600))
	admin := func(args ...string) (int, string, string) {
		return runCLI(append([]string{"admin"}, append(args, "--controlplane", cp, "--token-file", boot)...)...)
	}
	for _, args := range [][]string{{"tenant", "create", "t1"}, {"namespace", "create", "ns", "--tenant", "t1"}} {
		code, _, stderr := admin(args...)
		require.Equal(t, exitOK, code, stderr)
	}
	return cp, admin
}
