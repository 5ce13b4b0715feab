package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/testutil"
)

// The walk-through of docs/operations.md, "A local cluster", as a user
// runs it: scripts/cluster.sh up starts etcd, a control plane and three
// brokers and mints a client token with the development issuer; a
// publish through any broker, to any shard, reaches the shard's owner
// (forwarded when it is another broker), and felix sub at one broker
// follows not_owner to each shard's owner and reads them all. Then the
// replicated stream of docs/cluster.md, "Run a three-broker cluster on
// this machine" (replicationWalkthrough), and the rolling restart of
// docs/operations.md, "Try it on one machine" (operationsWalkthrough).
func TestLocalClusterWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four binaries and runs five processes")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("scripts/cluster.sh needs bash")
	}
	dir, base := t.TempDir(), freePortBase(t)
	script := func(verb ...string) (string, error) {
		cmd := exec.Command("bash", append(append([]string{"../../scripts/cluster.sh"}, verb...), dir)...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("CLUSTER_PORT_BASE=%d", base))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := script("down"); err != nil {
			t.Errorf("cluster.sh down: %v\n%s", err, out)
		}
	})
	if out, err := script("up"); err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
		for _, l := range logs {
			raw, _ := os.ReadFile(l)
			out += "\n== " + l + "\n" + logTail(raw)
		}
		t.Fatalf("cluster.sh up: %v\n%s", err, out)
	}
	env, err := script("env")
	require.NoError(t, err, env)
	require.NotContains(t, env, "FELIX_", "the walk-through's variables must not read as knobs")

	token, err := os.ReadFile(filepath.Join(dir, "client.token"))
	require.NoError(t, err)
	caPEM, err := os.ReadFile(filepath.Join(dir, "tls", "ca.pem"))
	require.NoError(t, err)
	pool, err := devtls.Pool(caPEM)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", base+21), fmt.Sprintf("127.0.0.1:%d", base+22), fmt.Sprintf("127.0.0.1:%d", base+23)}
	for i, addr := range brokers {
		c, err := client.Dial(ctx, addr, client.Config{Tenant: "t1", Token: strings.TrimSpace(string(token)), TLS: &tls.Config{RootCAs: pool}})
		require.NoError(t, err, "broker %d", i+1)
		pub, err := c.NewPublisher(ctx, "default", "demo")
		require.NoError(t, err)
		for shard := range 3 {
			require.NoError(t, pub.PublishShardAsync(uint32(shard), [][]byte{fmt.Appendf(nil, "via-%d", i+1)}).Wait(ctx))
		}
		c.Close()
	}

	redirected := 0
	for shard := range 3 {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "bin", "felix"), "sub", "--addr", brokers[0], "--ca", filepath.Join(dir, "tls", "ca.pem"),
			"--token", strings.TrimSpace(string(token)), "--stream", "demo", "--shard", fmt.Sprint(shard), "--from", "earliest", "--count", "3")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "felix sub shard %d: %s", shard, stderr.String())
		for i := range brokers {
			require.Contains(t, string(out), fmt.Sprintf(" via-%d\n", i+1), "shard %d", shard)
		}
		if strings.Contains(stderr.String(), "subscribing there") {
			redirected++
		}
	}
	require.Equal(t, 2, redirected, "three shards over three brokers: broker-1 owns one, the others are followed to their owner")

	forwarded, accepted := 0.0, 0.0
	for n := range 3 {
		m := testutil.Scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", base+31+n), metricsBearer)
		v, _ := m.Value("felix_forwarded_events_total", nil)
		forwarded += v
		v, _ = m.Value("felix_stream_publish_events_total", map[string]string{"stream": "demo"})
		accepted += v
	}
	require.Equal(t, 6.0, forwarded, "each broker forwards the two shards it does not own")
	require.Equal(t, 9.0, accepted, "every publish is accepted once, by its owner")

	replicationWalkthrough(t, dir, base, strings.TrimSpace(string(token)), brokers, script)
	operationsWalkthrough(t, dir, base)
}

// metricsBearer is what scrapes of a broker's admin API send.
const metricsBearer = ""

// freePortBase finds a base port whose cluster ports (base to base+33, TCP
// and UDP) are free at the moment.
func freePortBase(t *testing.T) int {
	for range 50 {
		base := 20000 + rand.IntN(12000) // below the ephemeral range: brokers restart on their ports
		if portsFree(base, []int{0, 1, 10, 11, 31, 32, 33}, []int{21, 22, 23}) {
			return base
		}
	}
	t.Skip("no free range of loopback ports found")
	return 0
}

func portsFree(base int, tcp, udp []int) bool {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for _, off := range tcp {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
		if err != nil {
			return false
		}
		closers = append(closers, l.Close)
	}
	for _, off := range udp {
		c, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", base+off))
		if err != nil {
			return false
		}
		closers = append(closers, c.Close)
	}
	return true
}
