package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/internal/testutil"
)

// metricsBearer is what scrapes of GET /metrics send.
const metricsBearer = ""

// GET /metrics counts requests by route and code, times token exchanges
// by result, shows the long-polls waiting on the feed and the placement's
// version and changes, and names the build; the listeners of a process
// share one registry.
func TestMetricsServed(t *testing.T) {
	p := newClusterAuthPlane(t)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants/t1/namespaces", `{"namespace":"ns"}`)
	p.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants/t1/namespaces/ns/streams", `{"stream":"s","shards":2}`)
	p.boot.register(t, "b1")
	pl := p.boot.awaitPlacement(t, 5*time.Second, func(pl cluster.Placement) bool { return len(pl.Assignments) == 2 })
	r := p.main.doToken(t, "POST", "/v1/token/exchange", `{"tenant":"t1","idp_token":"not.a.jwt"}`, "")
	require.NotEqual(t, http.StatusOK, r.status, r.body)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cursor := p.boot.follow(t)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/changes?cursor=%d&wait=30s", p.boot.url, cursor), nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var m testutil.Metrics
	testutil.Eventually(t, 5*time.Second, func() bool {
		m = testutil.Scrape(t, p.main.url+"/metrics", metricsBearer)
		v, _ := m.Value("felix_cp_feed_watchers", nil)
		return v == 1
	}, "the long-poll shows in felix_cp_feed_watchers")
	cancel()
	<-polled

	created, ok := m.Value("felix_cp_requests_total", map[string]string{"route": "/v1/tenants/{tenant}/namespaces", "method": "POST", "code": "201"})
	require.True(t, ok, "requests on the bootstrap listener show on the main one's /metrics")
	require.Equal(t, 1.0, created)
	refused := false
	for _, s := range m.Series("felix_cp_token_exchange_duration_seconds") {
		refused = refused || s["result"] != "ok"
	}
	require.True(t, refused, "the refused exchange is timed under its code")
	v, _ := m.Value("felix_cp_placement_version", nil)
	require.Equal(t, float64(pl.Version), v)
	v, _ = m.Value("felix_cp_placement_changes_total", nil)
	require.GreaterOrEqual(t, v, 1.0)
	v, _ = m.Value("felix_cp_members_live", nil)
	require.Equal(t, 1.0, v)
	v, _ = m.Value("felix_build_info", map[string]string{"program": "felix-controlplane"})
	require.Equal(t, 1.0, v)
}
