package broker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// stepDown posts a step-down of rf3's shard to broker i's admin API.
func (rc *raftCluster) stepDown(i int, path, body string) (int, broker.StepDownAnswer) {
	rc.t.Helper()
	if path == "" {
		path = "/v1/streams/t1/default/rf3/shards/0/step-down"
	}
	w := httptest.NewRecorder()
	rc.nodes[i].b.AdminHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	var ans broker.StepDownAnswer
	require.NoError(rc.t, json.Unmarshal(w.Body.Bytes(), &ans), w.Body.String())
	return w.Code, ans
}

// TestStepDownByHand: docs/operations.md, "Moving a leader by hand": a
// follower refuses a step-down naming the leader; the leader hands over to
// the member named, or to an in-sync one, and answers once it follows;
// a member outside the group, an unknown stream or shard are refused.
func TestStepDownByHand(t *testing.T) {
	rc := startRaftCluster(t)
	lead := rc.leader()
	follower := (lead + 1) % 3
	require.Eventually(t, func() bool { // the leader's first message reached it
		return rc.nodes[follower].b.Stats().Streams[0].Shards[0].Replica.Leader != ""
	}, 10*time.Second, 10*time.Millisecond)
	code, ans := rc.stepDown(follower, "", "")
	require.Equal(t, http.StatusConflict, code, ans.Error)
	require.Equal(t, rc.ids[lead], ans.Leader, "a follower names the leader")

	to := (lead + 2) % 3
	code, ans = rc.stepDown(lead, "", `{"to":"`+rc.ids[to]+`"}`)
	require.Equal(t, http.StatusOK, code, ans.Error)
	require.Equal(t, broker.StepDownAnswer{Stream: "t1/default/rf3", From: rc.ids[lead], Leader: rc.ids[to]}, ans)
	require.Eventually(t, func() bool { return rc.leader() == to }, 10*time.Second, 20*time.Millisecond)

	// Once the new leader has heard from every voter, any other one.
	require.Eventually(t, func() bool {
		return len(rc.nodes[to].b.Stats().Streams[0].Shards[0].Replica.InSync) == 3
	}, 10*time.Second, 20*time.Millisecond)
	code, ans = rc.stepDown(to, "", "")
	require.Equal(t, http.StatusOK, code, ans.Error)
	require.NotEqual(t, rc.ids[to], ans.Leader)
	require.NotEmpty(t, ans.Leader)

	now := rc.leader()
	for _, c := range []struct {
		path, body string
		code       int
	}{
		{"", `{"to":"b9"}`, http.StatusBadRequest},
		{"", `{"to":"` + rc.ids[now] + `"}`, http.StatusBadRequest},
		{"", `{"too":"b1"}`, http.StatusBadRequest},
		{"/v1/streams/t1/default/rf3/shards/1/step-down", "", http.StatusBadRequest},
		{"/v1/streams/t1/default/rf3/shards/x/step-down", "", http.StatusBadRequest},
		{"/v1/streams/t1/default/nope/shards/0/step-down", "", http.StatusNotFound},
	} {
		code, ans := rc.stepDown(now, c.path, c.body)
		require.Equal(t, c.code, code, "%s %s: %s", c.path, c.body, ans.Error)
		require.NotEmpty(t, ans.Error)
	}
	require.Equal(t, now, rc.leader(), "a refused step-down leaves the leader")
}
