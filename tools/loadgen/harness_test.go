package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/testutil"
)

// TestMain points the default token file at one of its own (the test
// brokers run the dev verifier).
func TestMain(m *testing.M) { os.Exit(testutil.RunWithDevToken(m, &defaultTokenFile)) }

// testBroker is a broker serving real QUIC on 127.0.0.1 in this process, as
// tools/felix/harness_test.go starts one, plus its admin API on an httptest
// server, so the loadgen creates its streams the way it does against
// `make run`.
type testBroker struct {
	addr, admin string
	caFile      string
	clientTLS   *tls.Config
}

// latencyBroker is the latency profile's broker: delivery batching off.
var latencyBroker = broker.Config{Batch: fanout.BatchConfig{MaxEvents: 1, MaxDelay: fanout.NoDelay}}

func startBroker(t *testing.T, cfg broker.Config) *testBroker {
	t.Helper()
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "cert.pem")
	require.NoError(t, os.WriteFile(caFile, cert.PEM, 0o644))
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	cfg.ListenAddrs = []string{pc.LocalAddr().String()}
	b, err := broker.New(cfg)
	require.NoError(t, err)
	admin := httptest.NewServer(b.AdminHandler())
	served := make(chan error, 1)
	go func() { served <- b.Serve(pc) }()
	select {
	case <-b.Listening():
	case err := <-served:
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() {
		admin.Close()
		require.NoError(t, b.Close())
		select {
		case err := <-served:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
		pc.Close()
	})
	return &testBroker{
		addr: pc.LocalAddr().String(), admin: strings.TrimPrefix(admin.URL, "http://"),
		caFile: caFile, clientTLS: &tls.Config{RootCAs: pool},
	}
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
	code := cli(ctx, args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
