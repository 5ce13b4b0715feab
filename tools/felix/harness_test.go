package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/testutil"
)

// TestMain gives the tests a dev directory and environment of their own
// (the test brokers run the dev verifier, which takes its "dev" token).
func TestMain(m *testing.M) { os.Exit(testutil.RunWithDevDir(m)) }

// testBroker is a broker serving real QUIC on 127.0.0.1 in this process
// (brokertest), with its certificate where --ca can read it and cache
// t1/default/demo.
type testBroker struct {
	bt          *brokertest.Broker
	b           *broker.Broker
	addr        string
	caFile      string
	fingerprint string
}

func startBroker(t *testing.T) *testBroker {
	t.Helper()
	return startBrokerWith(t, broker.Config{}, broker.StreamSpec{
		StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "demo"}, Shards: 1,
	})
}

// startBrokerWith starts a broker with cfg and the given streams.
func startBrokerWith(t *testing.T, cfg broker.Config, streams ...broker.StreamSpec) *testBroker {
	t.Helper()
	bt := brokertest.Start(t, cfg, brokertest.Options{Streams: streams,
		Caches: []broker.CacheSpec{{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: "demo"}}}})
	return &testBroker{bt: bt, b: bt.Broker, addr: bt.Addr, caFile: bt.CAFile, fingerprint: bt.Cert.Fingerprint}
}

// args puts the connection flags for this broker before extra.
func (tb *testBroker) args(extra ...string) []string {
	return append([]string{"--addr", tb.addr, "--ca", tb.caFile}, extra...)
}

// result is what a command printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func runPubT(t *testing.T, input string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := pub(ctxT(t), args, strings.NewReader(input), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func runSubT(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := sub(ctxT(t), args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// cancelOnWrite cancels a context once something was written to it.
type cancelOnWrite struct {
	io.Writer
	cancel context.CancelFunc
}

func (w cancelOnWrite) Write(p []byte) (int, error) {
	defer w.cancel()
	return w.Writer.Write(p)
}

// dialTest dials tb with cfg (tenant, token and TLS filled in).
func dialTest(t *testing.T, tb *testBroker, cfg client.Config) *client.Client {
	t.Helper()
	cfg.Tenant, cfg.Token, cfg.TLS = "t1", "dev", tb.bt.ClientTLS
	c, err := client.Dial(ctxT(t), tb.addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}
