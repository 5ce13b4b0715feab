package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/impair"
	"github.com/felixmq/felix/udp"
)

// testBroker is a broker serving real QUIC on 127.0.0.1 in this process
// (brokertest) with its admin API on a real listener, as felix-broker
// serves FELIX_ADMIN_BIND.
type testBroker struct {
	addr      string // QUIC
	admin     string // HOST:PORT of the admin HTTP server
	clientTLS *tls.Config
}

func startBroker(t *testing.T, cfg broker.Config, streams ...broker.StreamSpec) *testBroker {
	t.Helper()
	return startBrokerWithCert(t, cfg, nil, streams...)
}

// startBrokerWithCert is startBroker with a given certificate, for a
// client in another process that needs its PEM.
func startBrokerWithCert(t *testing.T, cfg broker.Config, cert *devtls.Cert, streams ...broker.StreamSpec) *testBroker {
	t.Helper()
	bt := brokertest.Start(t, cfg, brokertest.Options{Streams: streams, Cert: cert, Admin: true})
	return &testBroker{addr: bt.Addr, admin: bt.Admin, clientTLS: bt.ClientTLS}
}

// dial connects to addr (the broker's or a relay's); tenant, token and TLS
// are filled in.
func (tb *testBroker) dial(t *testing.T, addr string, cfg client.Config) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Tenant, cfg.Token, cfg.TLS = "t1", "dev", tb.clientTLS
	c, err := client.Dial(ctx, addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func spec(stream string, durable bool) broker.StreamSpec {
	s := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: stream}, Shards: 1}
	if durable {
		s.Durable, s.Fsync = true, "on_commit"
	}
	return s
}

// load is felix-loadgen in miniature, shaped so that every column of
// felixtrace has something to show:
//   - a paced fire-and-forget publisher on "live" and an acked, pipelined
//     one on the on_commit stream "orders" (bytes in, commit syncs with
//     several waiters);
//   - a subscriber reading both (bytes out, delivered);
//   - a subscriber on "live" that never reads, behind small QUIC windows,
//     so its broker queue fills and drops (depth, drops);
//   - a publisher and subscriber on "live" through a relay that blacks out
//     for 30 ms every 200 ms, so the broker loses packets and its
//     congestion controller enters recovery (lost, congestion events).
//
// It runs until ctx ends; stop, after that, waits for its goroutines (it is
// idempotent).
func load(ctx context.Context, t *testing.T, tb *testBroker) (stop func()) {
	t.Helper()
	proxy, err := impair.New(tb.addr)
	require.NoError(t, err)
	direct := tb.dial(t, tb.addr, client.Config{})
	slow := tb.dial(t, tb.addr, client.Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 256 << 10, SubscriptionBuffer: 1})
	lossy := tb.dial(t, proxy.Addr(), client.Config{BlackHoleCooldown: -1})

	var wg sync.WaitGroup
	var errs atomic.Pointer[error]
	fail := func(err error) {
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			errs.CompareAndSwap(nil, &err)
		}
	}
	subscribe := func(c *client.Client, stream string, read bool) {
		sub, err := c.Subscribe(ctx, "default", stream, client.SubscribeOptions{})
		require.NoError(t, err)
		if read {
			wg.Go(func() {
				for ctx.Err() == nil {
					_, err := sub.Next(ctx)
					fail(err)
				}
			})
		}
	}
	subscribe(direct, "live", true)
	subscribe(direct, "orders", true)
	subscribe(slow, "live", false)
	subscribe(lossy, "live", true)

	payloads := make([][]byte, 16)
	for i := range payloads {
		payloads[i] = make([]byte, 512)
	}
	for _, c := range []*client.Client{direct, lossy} {
		pub, err := c.NewPublisher(ctx, "default", "live")
		require.NoError(t, err)
		wg.Go(func() {
			for tick := time.NewTicker(time.Millisecond); ctx.Err() == nil; <-tick.C {
				fail(pub.Send(payloads))
			}
		})
	}
	orders, err := direct.NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	wg.Go(func() {
		var inflight []*client.PendingAck // at most 8 acked publishes
		for ctx.Err() == nil {
			if len(inflight) == 8 {
				fail(inflight[0].Wait(ctx))
				inflight = inflight[1:]
			}
			inflight = append(inflight, orders.PublishAsync(payloads[:4]))
		}
	})
	wg.Go(func() {
		for tick := time.NewTicker(200 * time.Millisecond); ctx.Err() == nil; <-tick.C {
			proxy.SetBlackHole(true)
			time.Sleep(30 * time.Millisecond)
			proxy.SetBlackHole(false)
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			wg.Wait()
			proxy.Close()
			if err := errs.Load(); err != nil {
				t.Errorf("load: %v", *err)
			}
		})
	}
}

// readJSON decodes a --json file.
func readJSON(t *testing.T, path string) (start *startRecord, samples []Sample, summary *Summary) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	dec := json.NewDecoder(f)
	for dec.More() {
		var r record
		require.NoError(t, dec.Decode(&r))
		switch {
		case r.Start != nil:
			start = r.Start
		case r.Sample != nil:
			samples = append(samples, *r.Sample)
		case r.Summary != nil:
			summary = r.Summary
		}
	}
	require.NotNil(t, start, "no start record")
	require.NotNil(t, summary, "no summary record")
	return start, samples, summary
}

// fakeAdmin serves /debug/felix/stats from a broker that is not there: one
// connection whose counters grow with every scrape, and no CPU account (as
// from a broker on macOS). For tests of felixtrace
// itself rather than of the broker.
func fakeAdmin(t *testing.T) string {
	var n atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != statsPath {
			http.NotFound(w, r)
			return
		}
		i := n.Add(1)
		st := broker.Stats{Time: time.Now(), CPUUnavailable: "fake broker", Connections: []broker.ConnectionStats{{
			ID: 1, Remote: "127.0.0.1:1", SmoothedRTT: 100 * time.Microsecond, BytesSent: 1000 * i, BytesReceived: 500 * i,
			Path: udp.ConnSnapshot{MTU: 1452},
		}}}
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}
