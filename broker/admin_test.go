package broker_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/testutil"
)

func do(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestAdminStreamsAPI(t *testing.T) {
	h := startBroker(t, broker.Config{})
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()

	code, body := do(t, srv, "POST", "/v1/streams", `{"tenant":"t1","namespace":"default","stream":"orders","shards":4}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, body = do(t, srv, "POST", "/v1/streams", `{"tenant":"t1","namespace":"default","stream":"orders","shards":4}`)
	require.Equal(t, http.StatusConflict, code, body)
	for _, bad := range []string{`{"tenant":"t1","namespace":"default","stream":""}`, `{"tenant":"t1","namespace":"default","stream":"x","shards":100000}`,
		`{"tenant":"t1","namespace":"a/b","stream":"x"}`, `not json`, `{"tenant":"t1","namespace":"d","stream":"x","shardz":2}`} {
		code, body = do(t, srv, "POST", "/v1/streams", bad)
		require.Equal(t, http.StatusBadRequest, code, "%s -> %s", bad, body)
		require.Contains(t, body, `"error"`)
	}
	code, body = do(t, srv, "GET", "/v1/streams", "")
	require.Equal(t, http.StatusOK, code)
	var list struct{ Streams []broker.StreamSpec }
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Streams, 2)

	// The new stream is usable at once, shard by shard.
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	sub, err := c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{Shard: 3})
	require.NoError(t, err)
	_, err = c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{Shard: 4})
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Contains(t, be.Message, "shard 4 not in [0, 4)")
	require.NoError(t, sub.Close())
}

func TestAdminHealthMetricsAndStats(t *testing.T) {
	h := startBroker(t, broker.Config{})
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	sub, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, []byte("x")))
	_, err = sub.Next(ctx)
	require.NoError(t, err)

	code, _ := do(t, srv, "GET", "/live", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = do(t, srv, "GET", "/ready", "")
	require.Equal(t, http.StatusOK, code)
	code, body := do(t, srv, "GET", "/metrics", "")
	require.Equal(t, http.StatusOK, code)
	for _, m := range []string{`felix_publish_requests_total{result="ok"} 1`, "felix_delivered_events_total 1", "felix_connections 1",
		"felix_subscribers 1", "felix_streams 1", "felix_publish_ack_latency_seconds_bucket", `felix_dropped_events_total{reason="subscriber_queue_full"} 0`, `felix_dropped_events_total{reason="ingress"} 0`} {
		require.Contains(t, body, m)
	}
	code, body = do(t, srv, "GET", "/debug/felix/stats", "")
	require.Equal(t, http.StatusOK, code)
	var st broker.Stats
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Connections, 1)
	require.Len(t, st.Connections[0].Subscriptions, 1)
	require.Equal(t, uint64(1), st.Streams[0].Shards[0].NextOffset)
	require.NotZero(t, st.Connections[0].BytesReceived)
	require.Equal(t, 1452, st.Connections[0].Path.MTU, "loopback peers start at 1452 (MTU policy)")
	cs := st.Connections[0]
	require.Equal(t, []string{"t1", "dev", broker.RolePubSub}, []string{cs.Tenant, cs.Principal, cs.Role})
	require.Equal(t, []string{"t1/default/demo"}, cs.Streams)
	require.Len(t, st.Traffic, 1, "one stream, within the series bound")
	require.Equal(t, "demo", st.Traffic[0].Stream)
	require.Equal(t, uint64(1), st.Traffic[0].PublishEvents)
	require.Equal(t, uint64(1), st.Traffic[0].DeliveredEvents)
	require.Equal(t, uint64(1), st.Traffic[0].AckLatency.Count)
	require.Equal(t, uint64(1), st.Traffic[0].AckLatency.Counts[len(st.Traffic[0].AckLatency.Counts)-1])
	require.True(t, st.Connections[0].GSO)
	code, _ = do(t, srv, "GET", "/debug/pprof/", "")
	require.Equal(t, http.StatusOK, code)

	// Drain: readiness flips to 503 before connections close.
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, h.b.Drain(dctx))
	code, _ = do(t, srv, "GET", "/ready", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
}

// The dev verifier accepts any token, so it may only serve loopback.
func TestDevVerifierRefusedOffLoopback(t *testing.T) {
	_, err := broker.New(broker.Config{TLS: h0TLS(t), ListenAddrs: []string{"0.0.0.0:5000"}})
	require.ErrorIs(t, err, broker.ErrInvalidConfig)
	require.Contains(t, err.Error(), "not loopback and no auth is configured")
	_, err = broker.New(broker.Config{TLS: h0TLS(t), ListenAddrs: []string{"127.0.0.1:5000", "[::1]:8080", "localhost:1"}})
	require.NoError(t, err)
}

func h0TLS(t *testing.T) *tls.Config {
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
}

// FELIX_CONN_STATS_MS: every connection logs its QUIC statistics.
func TestConnStatsAreLogged(t *testing.T) {
	var buf testutil.LockedBuffer
	h := startBroker(t, broker.Config{ConnStatsInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	c := h.dial(t)
	pub, err := c.NewPublisher(ctxT(t, 10*time.Second), "default", "demo")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctxT(t, 10*time.Second), []byte("x")))
	testutil.Eventually(t, 5*time.Second, func() bool { return strings.Contains(buf.String(), "conn stats") }, "no conn stats line")
	require.Contains(t, buf.String(), "mtu=1452")
}

// NoConnTrace gives quic-go no tracer: the connection's stats keep quic-go's
// own counters but no path state, and FELIX_CONN_STATS_MS brings it back.
func TestNoConnTraceLeavesPathEmpty(t *testing.T) {
	for _, tc := range []struct {
		cfg     broker.Config
		wantMTU int
	}{
		{broker.Config{NoConnTrace: true}, 0},
		{broker.Config{NoConnTrace: true, ConnStatsInterval: time.Hour}, 1452},
		{broker.Config{}, 1452},
	} {
		h := serveBroker(t, tc.cfg, benchStreamSpec(false))
		ctx := context.Background()
		pub, err := h.dial(t).NewPublisher(ctx, "default", "bench")
		require.NoError(t, err)
		require.NoError(t, pub.Publish(ctx, []byte("x")))
		st := h.b.Stats()
		require.Len(t, st.Connections, 1)
		require.NotZero(t, st.Connections[0].BytesReceived)
		require.Equal(t, tc.wantMTU, st.Connections[0].Path.MTU)
	}
}
