package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/cluster"
)

// felix admin shard step-down finds the shard's members in the placement,
// asks the preferred leader's admin API, follows its answer naming the
// leader, and prints the leader's answer; the broker gets the token and
// the body. The real endpoint and a real hand-over are tested in package
// broker (TestStepDownByHand) and with broker processes
// (TestRollingRestartLosesNoPublish).
func TestAdminShardStepDownFollowsTheLeader(t *testing.T) {
	var asked []string
	fake := func(id string, h func(w http.ResponseWriter, req broker.StepDownRequest)) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/v1/streams/t1/default/rep/shards/2/step-down", r.URL.Path)
			require.Equal(t, "Bearer broker-secret", r.Header.Get("Authorization"))
			var req broker.StepDownRequest
			require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
			asked = append(asked, id)
			h(w, req)
		}))
		t.Cleanup(s.Close)
		return s
	}
	answer := func(w http.ResponseWriter, code int, a broker.StepDownAnswer) {
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(a)
	}
	b1 := fake("b1", func(w http.ResponseWriter, _ broker.StepDownRequest) {
		answer(w, http.StatusConflict, broker.StepDownAnswer{Error: "follower", Leader: "b2"})
	})
	b2 := fake("b2", func(w http.ResponseWriter, req broker.StepDownRequest) {
		answer(w, http.StatusOK, broker.StepDownAnswer{Stream: "t1/default/rep", Shard: 2, From: "b2", Leader: req.To})
	})
	p := cluster.Placement{Version: 3, Members: []cluster.Member{
		{ID: "b1", AdminAddr: strings.TrimPrefix(b1.URL, "http://"), Live: true},
		{ID: "b2", AdminAddr: strings.TrimPrefix(b2.URL, "http://"), Live: true},
		{ID: "b3", Live: true}}}
	for i := range 3 {
		p.Assignments = append(p.Assignments, cluster.Assignment{
			Shard: cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "rep", Shard: i}, Owner: "b1", Durable: true,
			Replicas: []string{"b1", "b2", "b3"}})
	}
	p.Assignments = append(p.Assignments, cluster.Assignment{Shard: cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "plain"}, Owner: "b3"})
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/placement", r.URL.Path)
		json.NewEncoder(w).Encode(p)
	}))
	t.Cleanup(cp.Close)
	tok := filepath.Join(t.TempDir(), "broker.token")
	require.NoError(t, os.WriteFile(tok, []byte("broker-secret\n"), 0o600))
	shard := func(args ...string) (int, string, string) {
		return runCLI(append([]string{"admin", "shard", "step-down", "--controlplane", cp.URL, "--admin-token-file", tok}, args...)...)
	}

	code, out, stderr := shard("--tenant", "t1", "--stream", "rep", "--shard", "2", "--to", "b3")
	require.Equal(t, exitOK, code, stderr)
	var ans broker.StepDownAnswer
	require.NoError(t, json.Unmarshal([]byte(out), &ans))
	require.Equal(t, broker.StepDownAnswer{Stream: "t1/default/rep", Shard: 2, From: "b2", Leader: "b3"}, ans)
	require.Equal(t, []string{"b1", "b2"}, asked, "the preferred leader first, then the leader it names")

	code, _, stderr = shard("--tenant", "t1", "--stream", "plain")
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "is not replicated")
	code, _, stderr = shard("--tenant", "t1", "--stream", "rep", "--shard", "7")
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "the placement has no shard t1/default/rep#7")
	code, _, _ = shard("--stream", "rep")
	require.Equal(t, exitUsage, code)
	code, _, _ = runCLI("admin", "shard", "move")
	require.Equal(t, exitUsage, code)
}
