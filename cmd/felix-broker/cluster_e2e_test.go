package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/testutil"
)

// e2eLease is the members' lease: a killed broker's ephemeral shards move
// within it (plus the placer's recompute).
const e2eLease = 2 * time.Second

// cpHarness is a control plane in this process on an embedded etcd (the
// brokers are real processes), with a tenant whose IdP issues writer
// tokens.
type cpHarness struct {
	url, bootstrap string
	call           func(method, path, body, bearer string) (int, string)
	idp            *rsaIdP
	tokens         *controlplane.Tokens
}

// e2eOperator is the operator tenant: node credentials belong to it.
const e2eOperator = "ops"

func startClusterControlPlane(t *testing.T) *cpHarness {
	return startClusterControlPlaneTTL(t, time.Hour)
}

// startClusterControlPlaneTTL mints Felix tokens (node credentials too)
// that live ttl.
func startClusterControlPlaneTTL(t *testing.T, ttl time.Duration) *cpHarness {
	return startClusterControlPlaneWith(t, ttl, controlplane.PlacerConfig{})
}

// startClusterControlPlaneWith is startClusterControlPlaneTTL with the
// placer's config (its lease and retry delay those of the tests).
func startClusterControlPlaneWith(t *testing.T, ttl time.Duration, pc controlplane.PlacerConfig) *cpHarness {
	const bootstrap = "bootstrap-token-for-the-cluster-e2e-0123456789"
	st, err := controlplane.NewEtcdStore(controlplane.EtcdConfig{Endpoints: []string{startEtcd(t)}, Prefix: "/felix-e2e/"})
	require.NoError(t, err)
	tokens, err := controlplane.NewTokens(st, controlplane.TokensConfig{Minter: auth.MinterConfig{TTL: ttl}})
	require.NoError(t, err)
	boot, err := controlplane.NewBootstrapAuthorizer(bootstrap)
	require.NoError(t, err)
	felix, err := controlplane.NewFelixTokenAuthorizer(controlplane.FelixTokenConfig{Keys: tokens, OperatorTenant: e2eOperator,
		ClockSkew: min(ttl/10, time.Minute)}) // short tokens expire for the control plane too
	require.NoError(t, err)
	pc.LeaseTTL, pc.RetryDelay = e2eLease, 50*time.Millisecond
	placer, err := controlplane.NewPlacer(st, pc)
	require.NoError(t, err)
	cp, err := controlplane.New(controlplane.Config{Store: st, Authorizer: controlplane.AnyOf{boot, felix}, Tokens: tokens, Placer: placer,
		OperatorTenant: e2eOperator})
	require.NoError(t, err)
	srv := httptest.NewServer(cp)
	t.Cleanup(func() { srv.Close(); cp.Close(); placer.Close(); st.Close() })
	h := &cpHarness{url: srv.URL, bootstrap: bootstrap, idp: newRSAIdP(t), tokens: tokens}
	h.call = cpCaller(t, srv.URL)
	idpConf := `{"issuer":"` + h.idp.URL + `","jwks_url":"` + h.idp.URL + `","audiences":["api://felix"],` +
		`"roles":{"writer":[{"action":"stream.publish","resource":"t1/default/*"},{"action":"stream.subscribe","resource":"t1/default/*"}]},` +
		`"bindings":{"Felix.Writer":["writer"]}}`
	h.mustCall(t, http.StatusCreated, http.MethodPost, "/v1/tenants", `{"tenant":"t1","idp":`+idpConf+`}`)
	h.mustCall(t, http.StatusCreated, http.MethodPost, "/v1/tenants/t1/namespaces", `{"tenant":"t1","namespace":"default"}`)
	h.mustCall(t, http.StatusCreated, http.MethodPost, "/v1/tenants", `{"tenant":"`+e2eOperator+`"}`)
	return h
}

// nodeCredential mints broker id's own node credential (a Felix token of
// the operator tenant with cluster.node) into a file.
func (h *cpHarness) nodeCredential(t *testing.T, id string) string {
	tok, _, err := h.tokens.MintNode(context.Background(), e2eOperator, id)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "node-token-"+id)
	require.NoError(t, os.WriteFile(f, []byte(tok), 0o600))
	return f
}

// startEtcd runs an embedded etcd server on loopback for the test and
// returns its client endpoint; the test is skipped if it cannot start.
func startEtcd(t *testing.T) string {
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	clientURL := url.URL{Scheme: "http", Host: freeAddr(t, "tcp")}
	peerURL := url.URL{Scheme: "http", Host: freeAddr(t, "tcp")}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Skipf("embedded etcd could not start on loopback: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		t.Skip("embedded etcd not ready within 20 s")
	}
	return clientURL.Host
}

// cpCaller calls the control plane at base with a bearer token ("" for
// none) and returns the status and body.
func cpCaller(t *testing.T, base string) func(method, path, body, bearer string) (int, string) {
	return func(method, path, body, bearer string) (int, string) {
		return testutil.Call(t, method, base+path, body, bearer)
	}
}

func (h *cpHarness) mustCall(t *testing.T, want int, method, path, body string) string {
	code, reply := h.call(method, path, body, h.bootstrap)
	require.Equal(t, want, code, "%s %s: %s", method, path, reply)
	return reply
}

func (h *cpHarness) createStream(t *testing.T, name string, shards int, durable bool) {
	extra := ""
	if durable {
		extra = `,"durable":true,"fsync":"on_commit"`
	}
	h.mustCall(t, http.StatusCreated, http.MethodPost, "/v1/tenants/t1/namespaces/default/streams",
		fmt.Sprintf(`{"tenant":"t1","namespace":"default","stream":%q,"shards":%d%s}`, name, shards, extra))
}

// writerToken exchanges an IdP token for a Felix token of t1 that may
// publish and subscribe.
func (h *cpHarness) writerToken(t *testing.T) string {
	code, body := h.call(http.MethodPost, "/v1/token/exchange", `{"tenant":"t1","idp_token":"`+h.idp.token(t, "alice", "Felix.Writer")+`"}`, "")
	require.Equal(t, http.StatusOK, code, body)
	var r api.ExchangeResponse
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	return r.Token
}

// clusterBroker is one broker process of the cluster, restartable on the
// same address, certificate and data directory.
type clusterBroker struct {
	id, addr, admin string
	env             []string
	dir             string // data and logs
	runs            int
	kill            func()
	// term sends SIGTERM and waits for the process to exit (drained).
	term func() error
}

func newClusterBroker(t *testing.T, id string, cp *cpHarness, certFile, keyFile string) *clusterBroker {
	dir := t.TempDir()
	cb := &clusterBroker{id: id, addr: freeAddr(t, "udp"), admin: freeAddr(t, "tcp"), dir: dir}
	cb.env = []string{"FELIX_NODE_ID=" + id, "FELIX_QUIC_BIND=" + cb.addr, "FELIX_ADMIN_BIND=" + cb.admin,
		// Each broker its own node credential: forwarded streams are
		// verified as Felix tokens of the operator tenant, not compared;
		// the broker follows the control plane's feed with it as well.
		"FELIX_CONTROLPLANE_URL=" + cp.url, "FELIX_NODE_TOKEN_FILE=" + cp.nodeCredential(t, id),
		"FELIX_TLS_CERT_FILE=" + certFile, "FELIX_TLS_KEY_FILE=" + keyFile, "FELIX_DATA_DIR=" + filepath.Join(dir, "data"),
		"FELIX_STREAMS=", "FELIX_CACHES=", "FELIX_LOG_LEVEL=debug", "FELIX_ZONE=zone-" + id}
	return cb
}

// start runs the process and waits for "felix-broker ready" (it is ready
// once a placement lists it). Each start logs to its own file.
func (cb *clusterBroker) start(t *testing.T) {
	cb.runs++
	log := cb.logPath()
	f, err := os.Create(log)
	require.NoError(t, err)
	cmd := brokerCmd(t, cb.env)
	cmd.Stderr = f
	require.NoError(t, cmd.Start())
	f.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	cb.kill = func() { cmd.Process.Kill(); <-exited }
	cb.term = func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		return <-exited
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.After(25 * time.Second)
	for {
		raw, _ := os.ReadFile(log)
		if strings.Contains(string(raw), "felix-broker ready") {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("broker %s exited before ready (%v):\n%s", cb.id, err, logTail(raw))
		case <-deadline:
			t.Fatalf("broker %s not ready:\n%s", cb.id, logTail(raw))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logPath is the log file of the broker's current (or last) run.
func (cb *clusterBroker) logPath() string {
	return filepath.Join(cb.dir, fmt.Sprintf("stderr-%d", cb.runs))
}

// logTail is the end of the broker's current log.
func (cb *clusterBroker) logTail() string {
	raw, _ := os.ReadFile(cb.logPath())
	return logTail(raw)
}

func logTail(raw []byte) string {
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

func (cb *clusterBroker) fullStats(t *testing.T) broker.Stats {
	resp, err := http.Get("http://" + cb.admin + "/debug/felix/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var s broker.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	return s
}

func (cb *clusterBroker) stats(t *testing.T) broker.ClusterStats { return cb.fullStats(t).Cluster }

// ledger is what was acked per shard and what each shard's subscribers
// received, to check exactly-once delivery of acked publishes.
type ledger struct {
	mu    sync.Mutex
	acked map[int][]string
	seen  map[int]map[string]int
}

func (l *ledger) ack(shard int, p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[shard] = append(l.acked[shard], p)
}

// follow records shard's events from sub until it ends.
func (l *ledger) follow(ctx context.Context, shard int, sub *client.Subscription) {
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return
		}
		l.mu.Lock()
		l.seen[shard][string(ev.Payload)]++
		l.mu.Unlock()
	}
}

// complete: every acked publish reached its shard's subscribers exactly
// once; missing/duplicated describe the first failure.
func (l *ledger) complete() (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for shard, ps := range l.acked {
		for _, p := range ps {
			switch n := l.seen[shard][p]; {
			case n == 0:
				return false, fmt.Sprintf("shard %d: acked %s not delivered", shard, p)
			case n > 1:
				return false, fmt.Sprintf("shard %d: acked %s delivered %d times", shard, p, n)
			}
		}
	}
	return true, ""
}

func e2eOwnerCounts(p *cluster.Placement, stream string) map[string]int {
	c := map[string]int{}
	for _, a := range p.Assignments {
		if a.Stream == stream {
			c[a.Owner]++
		}
	}
	return c
}

func liveMember(p *cluster.Placement, id string) bool {
	for _, m := range p.Members {
		if m.ID == id {
			return m.Live
		}
	}
	return false
}

// TestClusterEndToEnd is cluster mode end to end on real processes: embedded
// etcd, one control plane, three broker processes on loopback, a stream of 12
// ephemeral shards placed 4/4/4 and one of 3 durable shards. The plain
// client reaches every shard through one broker (forwarded); the
// ClusterClient forwards once per shard and then goes to the owner. A
// broker killed with kill -9 loses its lease, its ephemeral shards move
// within the lease, clients re-route and publishing resumes, while its
// durable shards answer owner_unavailable; it rejoins and the placement
// rebalances moving only what it needs to. No acked publish is lost or
// duplicated at the subscribers.
func TestClusterEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a control plane and three broker processes")
	}
	e, p1 := startClusterE2E(t)
	e.plainClientIsForwarded()
	e.clusterClientForwardsOnce(p1)
	p2, durOnB2 := e.killB2(p1)
	e.rejoinB2(p2, durOnB2)
	// No acked publish lost or duplicated.
	e.awaitDelivered()
}

// clusterE2E is TestClusterEndToEnd's cluster, clients and ledger.
type clusterE2E struct {
	t        *testing.T
	ctx      context.Context
	cp       *cpHarness
	brokers  map[string]*clusterBroker
	w        *api.Watcher  // the test's view of the placement
	ccfg     client.Config // t1 writer
	l        *ledger
	watchers *client.ClusterClient // the subscribers' client
	cc       *client.ClusterClient // the publishers'
	seq      int
}

var (
	e2eIDs    = []string{"b1", "b2", "b3"}
	e2eShards = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
)

// startClusterE2E starts the control plane and the brokers, creates the
// streams, waits for 4/4/4 and follows every shard at its owner.
func startClusterE2E(t *testing.T) (*clusterE2E, *cluster.Placement) {
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	t.Cleanup(cancel)
	e := &clusterE2E{t: t, ctx: ctx, cp: startClusterControlPlane(t), brokers: map[string]*clusterBroker{},
		l: &ledger{acked: map[int][]string{}, seen: map[int]map[string]int{}}}
	// One certificate for the three brokers: forwarding trusts it.
	certFile, keyFile, pool := writeCert(t, t.TempDir())
	for _, id := range e2eIDs {
		e.brokers[id] = newClusterBroker(t, id, e.cp, certFile, keyFile)
		e.brokers[id].start(t)
	}
	// Streams created once every broker is a member: placed over all three.
	e.cp.createStream(t, "e2e", 12, false)
	e.cp.createStream(t, "dur", 3, true)
	var err error
	e.w, err = api.NewWatcher(api.WatcherConfig{URL: e.cp.url, Token: e.cp.bootstrap, Wait: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { e.w.Close() })
	p1 := e.await("4/4/4", 10*time.Second, func(p *cluster.Placement) bool {
		c := e2eOwnerCounts(p, "e2e")
		return c["b1"] == 4 && c["b2"] == 4 && c["b3"] == 4 && len(e2eOwnerCounts(p, "dur")) > 0
	})
	for _, m := range p1.Members {
		require.Equal(t, "zone-"+m.ID, m.Zone, "each broker registers its FELIX_ZONE")
	}
	// Brokers apply the placement through their own watchers, and serve
	// both streams (their feed from the control plane).
	require.Eventually(t, func() bool {
		for _, id := range e2eIDs {
			st := e.brokers[id].fullStats(t)
			if st.Cluster.PlacementVersion < p1.Version || len(st.Streams) < 2 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	e.ccfg = client.Config{Tenant: "t1", Token: e.cp.writerToken(t), TLS: &tls.Config{RootCAs: pool}}
	e.watchers = e.dialCluster(client.ClusterConfig{})
	e.follow(p1, e2eShards...)
	return e, p1
}

func (e *clusterE2E) dialCluster(cfg client.ClusterConfig) *client.ClusterClient {
	cfg.Config, cfg.Bootstrap = e.ccfg, []string{e.brokers["b1"].addr}
	cc, err := client.DialCluster(e.ctx, cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { cc.Close() })
	return cc
}

// await waits at most d for a placement that satisfies ok.
func (e *clusterE2E) await(what string, d time.Duration, ok func(p *cluster.Placement) bool) *cluster.Placement {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, d)
	defer cancel()
	var after int64
	for {
		x, err := e.w.Next(ctx, after)
		if err != nil {
			cur := e.w.Current()
			require.NotNil(e.t, cur, "placement: %s: none", what)
			e.t.Fatalf("placement: %s: %v; last: version %d members %+v e2e %v dur %v", what, err, cur.Version, cur.Members,
				e2eOwnerCounts(&cur.Placement, "e2e"), e2eOwnerCounts(&cur.Placement, "dur"))
		}
		if ok(&x.Placement) {
			return &x.Placement
		}
		after = x.Version
	}
}

// follow subscribes to shards of e2e at their owner per p.
func (e *clusterE2E) follow(p *cluster.Placement, shards ...int) {
	e.watchers.SetPlacement(p)
	for _, i := range shards {
		e.l.mu.Lock()
		if e.l.seen[i] == nil {
			e.l.seen[i] = map[string]int{}
		}
		e.l.mu.Unlock()
		// The owner p names applies p from its own placement watch, a
		// moment after this test's watcher saw it; until then it answers
		// not_owner naming the old owner, as it should.
		var sub *client.Subscription
		require.Eventually(e.t, func() bool {
			var err error
			sub, err = e.watchers.Subscribe(e.ctx, "default", "e2e", client.SubscribeOptions{Shard: uint32(i)})
			require.True(e.t, err == nil || errors.Is(err, client.ErrNotOwner), "subscribe shard %d: %v", i, err)
			return err == nil
		}, 5*time.Second, 20*time.Millisecond, "subscribe shard %d at its new owner", i)
		go e.l.follow(e.ctx, i, sub)
	}
}

func (e *clusterE2E) forwardedTotal() (n uint64) {
	for _, id := range e2eIDs {
		if cb := e.brokers[id]; cb != nil {
			n += cb.stats(e.t).ForwardedPublishes
		}
	}
	return n
}

// publishCC publishes one unique payload through e.cc, recording acks.
func (e *clusterE2E) publishCC(stream string, shard int) error {
	e.seq++
	p := fmt.Sprintf("cc-%d-%d", shard, e.seq)
	err := e.cc.Publish(e.ctx, "default", stream, uint32(shard), [][]byte{[]byte(p)})
	if err == nil && stream == "e2e" {
		e.l.ack(shard, p)
	}
	return err
}

// awaitDelivered waits until every acked publish reached its shard's
// subscribers exactly once.
func (e *clusterE2E) awaitDelivered() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, why := e.l.complete()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal(why)
		}
		time.Sleep(20 * time.Millisecond) // polling the subscribers' ledger
	}
}

// plainClientIsForwarded: the plain client through b1 reaches every shard;
// the 8 that b1 does not own are forwarded.
func (e *clusterE2E) plainClientIsForwarded() {
	plain, err := client.Dial(e.ctx, e.brokers["b1"].addr, e.ccfg)
	require.NoError(e.t, err)
	defer plain.Close()
	pub, err := plain.NewPublisher(e.ctx, "default", "e2e")
	require.NoError(e.t, err)
	for _, i := range e2eShards {
		p := fmt.Sprintf("plain-%d", i)
		require.NoError(e.t, pub.PublishShardAsync(uint32(i), [][]byte{[]byte(p)}).Wait(e.ctx))
		e.l.ack(i, p)
	}
	require.Equal(e.t, uint64(8), e.brokers["b1"].stats(e.t).ForwardedPublishes, "b1 forwards the 8 shards it does not own")
}

// clusterClientForwardsOnce: learning from acks, the ClusterClient is
// forwarded once per shard; following the placement, never.
func (e *clusterE2E) clusterClientForwardsOnce(p1 *cluster.Placement) {
	e.cc = e.dialCluster(client.ClusterConfig{})
	before := e.forwardedTotal()
	for round := range 3 {
		for _, i := range e2eShards {
			require.NoError(e.t, e.publishCC("e2e", i))
		}
		require.Equal(e.t, before+8, e.forwardedTotal(), "round %d: forwarding stops after the first ack per shard", round)
	}
	require.NoError(e.t, e.cc.Close())
	e.cc = e.dialCluster(client.ClusterConfig{ControlPlaneURL: e.cp.url})
	shard11 := cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "e2e", Shard: 11}
	owner11, _ := p1.Owner(shard11)
	require.Eventually(e.t, func() bool { return e.cc.Owner(shard11) == owner11.QUICAddr }, 10*time.Second, 10*time.Millisecond)
	before = e.forwardedTotal()
	for _, i := range e2eShards {
		require.NoError(e.t, e.publishCC("e2e", i))
	}
	require.Equal(e.t, before, e.forwardedTotal(), "from the placement: no forwarding")
	e.awaitDelivered()
}

// killB2: kill -9 b2; its lease lapses, its ephemeral shards move within
// the lease, publishing resumes, its durable shards are owner_unavailable.
func (e *clusterE2E) killB2(p1 *cluster.Placement) (p2 *cluster.Placement, durOnB2 []int) {
	var movedShards []int
	for _, a := range p1.Assignments {
		switch {
		case a.Owner != "b2":
		case a.Stream == "dur":
			durOnB2 = append(durOnB2, a.Shard.Shard)
		case a.Stream == "e2e":
			movedShards = append(movedShards, a.Shard.Shard)
		}
	}
	require.NotEmpty(e.t, durOnB2, "b2 owns a durable shard (dur placed %v)", e2eOwnerCounts(p1, "dur"))
	killed := time.Now()
	b2 := e.brokers["b2"]
	b2.kill()
	e.brokers["b2"] = nil
	p2 = e.await("b2's ephemeral shards moved", e2eLease+5*time.Second, func(p *cluster.Placement) bool {
		return !liveMember(p, "b2") && e2eOwnerCounts(p, "e2e")["b2"] == 0
	})
	moved := time.Since(killed)
	e.t.Logf("b2 killed: its ephemeral shards moved after %v (lease %v)", moved.Round(time.Millisecond), e2eLease)
	require.Less(e.t, moved, e2eLease+2*time.Second, "moved within the lease TTL (plus etcd's expiry check and a recompute)")
	e.follow(p2, movedShards...)
	// Publishing resumes on every ephemeral shard once the ClusterClient
	// re-routes (its watcher, or the failed connection).
	resumed := time.Now()
	for _, i := range e2eShards {
		require.Eventually(e.t, func() bool { return e.publishCC("e2e", i) == nil }, 10*time.Second, 20*time.Millisecond, "shard %d", i)
	}
	e.t.Logf("publishing to every ephemeral shard resumed %v after the move", time.Since(resumed).Round(time.Millisecond))
	for _, i := range durOnB2 {
		require.ErrorIs(e.t, e.publishCC("dur", i), client.ErrOwnerUnavailable, "durable shard %d of the killed broker", i)
	}
	e.brokers["b2"] = b2
	return p2, durOnB2
}

// rejoinB2: b2 restarts; the placement rebalances moving only the 4
// shards b2 takes, and its durable shards are served again.
func (e *clusterE2E) rejoinB2(p2 *cluster.Placement, durOnB2 []int) {
	b2 := e.brokers["b2"]
	b2.start(e.t)
	p3 := e.await("rebalanced 4/4/4 with b2 back", 10*time.Second, func(p *cluster.Placement) bool {
		c := e2eOwnerCounts(p, "e2e")
		return liveMember(p, "b2") && c["b1"] == 4 && c["b2"] == 4 && c["b3"] == 4
	})
	var toB2 []int
	for _, a := range p3.Assignments {
		if prev, _ := p2.Owner(a.Shard); a.Stream == "e2e" && prev.ID != a.Owner {
			require.Equal(e.t, "b2", a.Owner, "shard %d moved %s → %s: only moves to the joiner are needed", a.Shard.Shard, prev.ID, a.Owner)
			toB2 = append(toB2, a.Shard.Shard)
		}
	}
	require.Len(e.t, toB2, 4, "minimal movement")
	e.t.Logf("b2 rejoined: shards %v moved back to it, nothing else moved; durable shards %v served again", toB2, durOnB2)
	require.Eventually(e.t, func() bool { return b2.stats(e.t).PlacementVersion >= p3.Version }, 10*time.Second, 20*time.Millisecond)
	e.follow(p3, toB2...)
	for _, i := range e2eShards {
		require.Eventually(e.t, func() bool { return e.publishCC("e2e", i) == nil }, 10*time.Second, 20*time.Millisecond, "shard %d", i)
	}
	for _, i := range durOnB2 {
		require.Eventually(e.t, func() bool { return e.publishCC("dur", i) == nil }, 10*time.Second, 20*time.Millisecond,
			"durable shard %d is back with its owner", i)
	}
}
