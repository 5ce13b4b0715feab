package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/testutil"
)

// TestMain points the default token file at one of its own (the test
// brokers run the dev verifier).
// It serves the echo role when --floor started it as a child.
func TestMain(m *testing.M) {
	if code, ok := childMain(os.Stdin, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	os.Exit(testutil.RunWithDevDir(m))
}

// testBroker is a broker serving real QUIC on 127.0.0.1 in this process
// (brokertest) with its admin API, so the loadgen creates its streams the
// way it does against `make run`.
type testBroker struct {
	addr, admin string
	caFile      string
	clientTLS   *tls.Config
}

// latencyBroker is the latency profile's broker: delivery batching off.
var latencyBroker = broker.Config{Batch: fanout.BatchConfig{MaxEvents: 1, MaxDelay: fanout.NoDelay}}

func startBroker(t *testing.T, cfg broker.Config) *testBroker {
	t.Helper()
	bt := brokertest.Start(t, cfg, brokertest.Options{Admin: true})
	return &testBroker{addr: bt.Addr, admin: bt.Admin, caFile: bt.CAFile, clientTLS: bt.ClientTLS}
}

// args puts the connection flags for this broker before extra.
func (tb *testBroker) args(extra ...string) []string {
	return append([]string{"--addr", tb.addr, "--admin", tb.admin, "--ca", tb.caFile}, extra...)
}

// config parses flags for this broker, as the command line would.
func (tb *testBroker) config(t *testing.T, extra ...string) Config {
	t.Helper()
	cfg, err := parseFlags(tb.args(extra...), &bytes.Buffer{})
	require.NoError(t, err)
	return cfg
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := cliMain(ctx, args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
