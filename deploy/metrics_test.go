package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/internal/testutil"
)

// metricsBearer is what scrapes of the admin API and the control plane
// send.
const metricsBearer = ""

var metricName = regexp.MustCompile(`\bfelix_[a-z0-9_]+`)

// The dashboard and the alert rules name only metrics that a running
// broker and control plane export (after the traffic that makes each
// series appear: streams, subscribers, caches, a consumer group, a token
// exchange).
func TestDeployArtefactsNameOnlyRealMetrics(t *testing.T) {
	exported := liveMetricNames(t)
	used := map[string][]string{}
	for _, e := range dashboardExprs(t) {
		for _, n := range metricName.FindAllString(e, -1) {
			used[n] = append(used[n], "dashboard")
		}
	}
	for _, e := range alertExprs(t) {
		for _, n := range metricName.FindAllString(e, -1) {
			used[n] = append(used[n], "alerts")
		}
	}
	require.Greater(t, len(used), 40, "the dashboard and the rules cover the broker and the control plane")
	for n, where := range used {
		if !exported[n] {
			t.Errorf("%s (used by %s) is not exported by a broker or a control plane", n, strings.Join(slices.Compact(where), ", "))
		}
	}
}

// liveMetricNames runs a broker and a control plane, makes them count
// something of everything, and returns every series name they export
// (a histogram's _bucket, _sum and _count included).
func liveMetricNames(t *testing.T) map[string]bool {
	bt := brokertest.Start(t, broker.Config{DataDir: t.TempDir()}, brokertest.Options{
		Streams: []broker.StreamSpec{{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"}, Shards: 1, Durable: true, Fsync: "on_commit"}},
		Caches:  []broker.CacheSpec{{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: "c"}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, bt.Addr, client.Config{Tenant: "t1", Token: "dev", TLS: bt.ClientTLS})
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, "default", "jobs", client.SubscribeOptions{})
	require.NoError(t, err)
	pub, err := c.NewPublisher(ctx, "default", "jobs")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, []byte("job")))
	_, err = sub.Next(ctx)
	require.NoError(t, err)
	k, err := c.OpenCache(ctx, "default", "c")
	require.NoError(t, err)
	require.NoError(t, k.Put(ctx, "k", []byte("v"), 0))
	if missing, err := c.OpenCache(ctx, "default", "missing"); err == nil {
		_, _, err = missing.Get(ctx, "k")
		require.Error(t, err, "a refused request counts in felix_cache_errors_total")
	}
	q, err := c.Consume(ctx, "default", "jobs", "workers", client.QueueOptions{Member: "w"})
	require.NoError(t, err)
	msg, err := q.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Ack(ctx, msg.Ref()))

	srv := httptest.NewServer(bt.Broker.AdminHandler())
	defer srv.Close()
	names := map[string]bool{}
	add := func(m testutil.Metrics) {
		for n, f := range m {
			names[n] = true
			if f.GetType().String() == "HISTOGRAM" {
				names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
			}
		}
	}
	add(testutil.Scrape(t, srv.URL+"/metrics", metricsBearer))

	cp, err := controlplane.New(controlplane.Config{})
	require.NoError(t, err)
	defer cp.Close()
	cps := httptest.NewServer(cp)
	defer cps.Close()
	code, _ := testutil.Call(t, http.MethodPost, cps.URL+"/v1/token/exchange", `{"tenant":"t1","idp_token":"x.y.z"}`, "")
	require.NotEqual(t, http.StatusOK, code)
	long, cancelPoll := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelPoll()
	req, _ := http.NewRequestWithContext(long, http.MethodGet, cps.URL+"/v1/placement?wait_ms=10", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	add(testutil.Scrape(t, cps.URL+"/metrics", metricsBearer))
	return names
}

func dashboardExprs(t *testing.T) []string {
	raw, err := os.ReadFile("grafana/dashboards/felix.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Type    string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Definition string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr)
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		out = append(out, v.Definition)
	}
	return out
}

type alertRules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert       string
			Expr        string
			For         string
			Labels      map[string]string
			Annotations map[string]string
		}
	}
}

func alertExprs(t *testing.T) []string {
	raw, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	var r alertRules
	require.NoError(t, yaml.Unmarshal(raw, &r))
	var out []string
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			require.NotEmpty(t, rule.Alert)
			require.NotEmpty(t, rule.Labels["severity"], rule.Alert)
			require.NotEmpty(t, rule.Annotations["summary"], rule.Alert)
			out = append(out, rule.Expr)
		}
	}
	return out
}
