package broker_test

import (
	"context"
	"crypto/tls"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
)

// harness is a broker serving real QUIC on 127.0.0.1 in this process
// (brokertest), under the names these tests use.
type harness struct {
	b         *broker.Broker
	addr      string
	clientTLS *tls.Config
	bt        *brokertest.Broker
}

var demo = broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "demo"}, Shards: 1}

func startBroker(t testing.TB, cfg broker.Config, streams ...broker.StreamSpec) *harness {
	t.Helper()
	if len(streams) == 0 {
		streams = []broker.StreamSpec{demo}
	}
	return serveBroker(t, cfg, streams...)
}

// serveBroker starts a broker with exactly the given streams (plus what a
// data directory's catalog reopens); its cleanup requires a clean Close.
func serveBroker(t testing.TB, cfg broker.Config, streams ...broker.StreamSpec) *harness {
	t.Helper()
	return serve(t, cfg, brokertest.Options{Streams: streams})
}

// serveFaultyBroker is serveBroker for a broker whose Close is expected to
// fail: the test closes it and checks the error; the cleanup only makes sure.
func serveFaultyBroker(t testing.TB, cfg broker.Config, streams ...broker.StreamSpec) *harness {
	t.Helper()
	return serve(t, cfg, brokertest.Options{Streams: streams, CloseMayFail: true})
}

func serve(t testing.TB, cfg broker.Config, opts brokertest.Options) *harness {
	t.Helper()
	applyBenchTrace(&cfg)
	bt := brokertest.Start(t, cfg, opts)
	return &harness{b: bt.Broker, addr: bt.Addr, clientTLS: bt.ClientTLS, bt: bt}
}

func (h *harness) dial(t testing.TB) *client.Client {
	return h.dialWith(t, client.Config{})
}

// dialWith dials with cfg; tenant, token and TLS are filled in when empty.
func (h *harness) dialWith(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Tenant == "" {
		cfg.Tenant, cfg.Token = "t1", "dev"
	}
	if cfg.TLS == nil {
		cfg.TLS = h.clientTLS
	}
	c, err := client.Dial(ctx, h.addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// applyBenchTrace sets NoConnTrace under FELIX_BENCH_NO_TRACE, on the
// broker side only: clients keep their tracer for stall detection.
func applyBenchTrace(cfg *broker.Config) {
	if os.Getenv("FELIX_BENCH_NO_TRACE") != "" {
		cfg.NoConnTrace = true
	}
}
