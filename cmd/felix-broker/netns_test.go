package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/impair"
)

// The netns test re-executes this binary inside the namespace it made as
// the client; these variables tell the child what to do.
const (
	netnsChildAddrEnv = "FELIX_NETNS_CHILD_ADDR"
	netnsChildCertEnv = "FELIX_NETNS_CHILD_CERT"
)

// TestLossyAcrossNetworkNamespaces runs the lossy-network scenario across a
// real network boundary: the test makes a network namespace joined to this
// one by a veth pair (its own addresses only), the impairment proxy listens
// on this side's veth address, and the publisher and resuming subscriber
// run in a child process inside the namespace. Every acked record must be
// delivered exactly once, in order.
func TestLossyAcrossNetworkNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a network namespace")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip(8) (iproute2) to make a network namespace")
	}
	id := os.Getpid() % 100000
	ns, here, there := fmt.Sprintf("felix%d", id), fmt.Sprintf("fx%da", id), fmt.Sprintf("fx%db", id)
	ip := func(args ...string) {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ip("link", "add", here, "type", "veth", "peer", "name", there)
	t.Cleanup(func() { exec.Command("ip", "link", "del", here).Run() })
	ip("link", "set", there, "netns", ns)
	ip("addr", "add", "10.199.0.1/24", "dev", here)
	ip("link", "set", here, "up")
	ip("netns", "exec", ns, "ip", "addr", "add", "10.199.0.2/24", "dev", there)
	ip("netns", "exec", ns, "ip", "link", "set", there, "up")
	ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")

	kb := newKillableBroker(t)
	kb.start(t)
	proxy, err := impair.New(kb.addr, impair.ListenAddr("10.199.0.1:0"))
	require.NoError(t, err)
	defer proxy.Close()
	proxy.Set(impair.Both, impair.Impairment{Loss: 0.02, Delay: 2 * time.Millisecond, Jitter: 2 * time.Millisecond})

	child := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestNetnsChild$", "-test.v")
	child.Env = append(os.Environ(), netnsChildAddrEnv+"="+proxy.Addr(), netnsChildCertEnv+"="+kb.certFile)
	out, err := child.CombinedOutput()
	require.NoError(t, err, "client in the namespace:\n%s", out)
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "NETNS RESULT") {
			line = l
		}
	}
	require.NotEmpty(t, line, "%s", out)
	st := proxy.Stats()
	t.Logf("%s; proxy on %s relayed %d, dropped %d", strings.TrimSpace(line), proxy.Addr(), st.Relayed, st.Dropped())
	require.Positive(t, st.Dropped(), "the impairment applied")
}

// TestNetnsChild is the client side of TestLossyAcrossNetworkNamespaces,
// run inside the namespace.
func TestNetnsChild(t *testing.T) {
	addr := os.Getenv(netnsChildAddrEnv)
	if addr == "" {
		t.Skip("run by TestLossyAcrossNetworkNamespaces")
	}
	pem, err := os.ReadFile(os.Getenv(netnsChildCertEnv))
	require.NoError(t, err)
	pool, err := devtls.Pool(pem)
	require.NoError(t, err)
	// The certificate names loopback and localhost, not the proxy's veth
	// address.
	via := &killableBroker{addr: addr, pool: pool, serverName: "localhost"}
	acked, lat, sub, _ := resumeRun(t, via, 2*time.Second)
	p50, p99 := lat.quantiles()
	fmt.Printf("NETNS RESULT acked=%d delivered=%d exactly once, ack p50 %v p99 %v, resubscribes %s\n",
		acked.len(), sub.count(), p50, p99, strconv.Itoa(sub.resubscribes))
}
