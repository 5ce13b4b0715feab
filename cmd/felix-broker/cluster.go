package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client/forward"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/knob"
)

// clusterNode is cluster mode (FELIX_NODE_ID): publishes for other
// brokers' shards go through a forwarder authenticated with the node
// credential; once the broker listens it registers with the control plane
// (api.Agent: a lease kept alive) and follows the placement
// (api.Watcher) into broker.SetPlacement.
type clusterNode struct {
	id, url string
	cred    *credential // the node credential, renewed by agent when it is a JWT
	fw      *forward.Forwarder
	agent   *api.Agent
	watcher *api.Watcher
	log     *slog.Logger
}

var _ broker.Forwarder = (*forward.Forwarder)(nil)

// firstPlacementTimeout bounds waiting, at start-up, for a placement that
// lists this broker: until then it would serve every shard as its own.
const firstPlacementTimeout = 15 * time.Second

// clusterSetup configures cfg for cluster mode when FELIX_NODE_ID is set;
// nil without it. cfg.TLS must be set (its certificate is trusted for
// forwarding unless FELIX_CLUSTER_CA_FILE says otherwise).
func clusterSetup(vals *knob.Values, cfg *broker.Config, cps *cpSync, log *slog.Logger) (*clusterNode, error) {
	id := knobNodeID.Get(vals)
	if id == "" {
		return nil, nil
	}
	if cps == nil {
		return nil, fmt.Errorf("%w: FELIX_NODE_ID needs FELIX_CONTROLPLANE_URL (membership and placement live there)", errConfig)
	}
	// One file for both (a node credential reads the feed too) is one
	// credential, so that the renewed token serves the feed as well.
	cred := cps.cred
	if f := knobNodeToken.Get(vals); f != "" && f != cps.cred.path {
		var err error
		if cred, err = fileCredential("FELIX_NODE_TOKEN_FILE", f); err != nil {
			return nil, err
		}
	}
	token := cred.Token()
	if token == "" {
		return nil, fmt.Errorf("%w: FELIX_NODE_ID needs a node credential (FELIX_NODE_TOKEN_FILE or FELIX_CONTROLPLANE_TOKEN_FILE)", errConfig)
	}
	roots, err := clusterRoots(vals, cfg.TLS)
	if err != nil {
		return nil, err
	}
	n := &clusterNode{id: id, url: cps.cp.URL(), cred: cred, log: log.With("node", id),
		fw: forward.New(forward.Config{TLS: &tls.Config{RootCAs: roots}, TokenFunc: cred.Token, Logger: log})}
	cfg.NodeID, cfg.Forwarder = id, n.fw
	cfg.RaftDialer = func(ctx context.Context, m cluster.Member) (broker.RaftConn, error) { return n.fw.DialRaft(ctx, m) }
	if !api.RenewableToken(token) {
		// An opaque shared secret is compared as it is. A JWT is checked by
		// NodeVerifier (signature, expiry), never by comparison: the first
		// one would otherwise stay accepted after it expired or was rotated.
		cfg.NodeToken = token
		return n, nil
	}
	// This broker's own node credential names the operator tenant: only
	// that tenant's node credentials open forwarded streams here.
	operator, err := tokenTenant(token)
	if err != nil {
		return nil, fmt.Errorf("%w: node credential: %v", errConfig, err)
	}
	cfg.NodeVerifier = nodeVerifier(cps.verifier, operator)
	log.Info("cluster: forwarded streams need a node credential of the operator tenant", "tenant", operator)
	return n, nil
}

// clusterRoots is what forwarding trusts: FELIX_CLUSTER_CA_FILE, else the
// system roots plus this broker's own certificate (brokers sharing one).
func clusterRoots(vals *knob.Values, own *tls.Config) (*x509.CertPool, error) {
	if f := knobClusterCA.Get(vals); f != "" {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: FELIX_CLUSTER_CA_FILE: %v", errConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw) {
			return nil, fmt.Errorf("%w: FELIX_CLUSTER_CA_FILE %s holds no PEM certificate", errConfig, f)
		}
		return pool, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, c := range own.Certificates {
		if len(c.Certificate) == 0 {
			continue
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("%w: own certificate: %v", errConfig, err)
		}
		pool.AddCert(leaf)
	}
	return pool, nil
}

// start follows the placement and registers b, reachable at quicAddr
// (FELIX_ADVERTISE_ADDR overrides it), then waits until a placement lists
// this broker.
func (n *clusterNode) start(ctx context.Context, vals *knob.Values, b *broker.Broker, quicAddr, adminAddr string) error {
	if a := knobAdvertise.Get(vals); a != "" {
		quicAddr = a
	}
	w, err := api.NewWatcher(api.WatcherConfig{URL: n.url, TokenFunc: n.cred.Token, Logger: n.log,
		OnChange: func(x *cluster.Index) {
			b.SetPlacement(&x.Placement)
		}})
	if err != nil {
		return fmt.Errorf("%w: placement watch: %v", errConfig, err)
	}
	n.watcher = w
	rctx, cancel := context.WithTimeout(ctx, firstPlacementTimeout)
	defer cancel()
	// A JWT node credential is renewed by the Agent half-way through its
	// life; an opaque one (a shared secret) is used as it is.
	tok := n.cred.Token()
	renew := api.RenewableToken(tok)
	n.agent, err = api.NewAgent(rctx, api.AgentConfig{URL: n.url, Token: tok, RenewToken: renew, Logger: n.log,
		Member: cluster.Member{ID: n.id, QUICAddr: quicAddr, AdminAddr: adminAddr, Zone: knobZone.Get(vals)}, Load: b.ShardLoads,
		Replicas: b.ReplicaReports, ReportNow: b.ReplicasChanged()})
	if err != nil {
		return fmt.Errorf("%w: registering with the control plane as %s: %v", errConfig, n.id, err)
	}
	if renew {
		n.cred.renewBy(n.agent.Token, func(tok string) {
			if err := n.agent.Adopt(tok); err != nil {
				n.log.Warn("rotated node credential not adopted; keeping the renewed one", "err", err)
			} else {
				n.log.Info("node credential rotated from its file")
			}
		})
	}
	var after int64
	for {
		x, err := w.Next(rctx, after)
		if err != nil {
			return fmt.Errorf("%w: no placement listing %s within %v: %v", errConfig, n.id, firstPlacementTimeout, err)
		}
		if _, ok := x.Member(n.id); ok {
			n.log.Info("cluster member", "quic", quicAddr, "lease_ttl", n.agent.LeaseTTL(),
				"placement_version", x.Version, "shards_owned", len(x.Owned(n.id)))
			return nil
		}
		after = x.Version
	}
}

// leave deregisters (the control plane moves this broker's ephemeral
// shards at once) and stops following; forwarding stays until close.
func (n *clusterNode) leave() {
	if n.agent != nil {
		n.agent.Close()
	}
}

func (n *clusterNode) close() {
	n.leave()
	if n.watcher != nil {
		n.watcher.Close()
	}
	n.fw.Close()
}
