package main

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/internal/knob"
)

// registry declares every FELIX_* knob the control plane reads; `felix-
// controlplane env` and the README table are generated from it.
var registry = knob.New()

// Listeners.
var (
	knobBind = registry.HostPort("FELIX_CP_BIND", "127.0.0.1:7070",
		"TCP address of the API brokers and clients use; a non-loopback address requires FELIX_CP_BOOTSTRAP_TOKEN_FILE")
	knobBootstrapBind = registry.HostPort("FELIX_CP_BOOTSTRAP_BIND", "127.0.0.1:7071",
		"TCP address of the bootstrap listener (the same API, admitting only the bootstrap token); served only with a token file")
	knobDevIssuer = registry.Enum("FELIX_CP_DEV_ISSUER", "loopback", []string{"loopback", "on", "off"},
		"development issuer (POST /v1/token/mint: a token with chosen rights, no IdP) on the bootstrap listener, for the bootstrap token only: loopback serves it when FELIX_CP_BOOTSTRAP_BIND is a loopback address, on serves it wherever that listener is")
	knobBootstrapTokenFile = registry.String("FELIX_CP_BOOTSTRAP_TOKEN_FILE", "", "path to a file, or empty",
		"file holding the day-0 bootstrap token (at least 16 bytes); empty: no bootstrap listener", nil)
)

// Store.
var (
	knobStore = registry.Enum("FELIX_CP_STORE", "memory", []string{"memory", "etcd"},
		"where resources live: in this process (lost on exit) or in etcd (shared by every control plane on it)")
	knobEtcdEndpoints = registry.String("FELIX_CP_ETCD_ENDPOINTS", "", "comma list of host:port or URLs, or empty",
		"etcd client endpoints (required with FELIX_CP_STORE=etcd)", checkEndpoints)
	knobEtcdPrefix = registry.String("FELIX_CP_ETCD_PREFIX", "/felix/controlplane/", "a key prefix ending in /",
		"etcd key prefix of this cluster's control-plane data", checkPrefix)
	knobEtcdTimeout = registry.Duration("FELIX_CP_ETCD_TIMEOUT_MS", 5000, 50, 600000, time.Millisecond,
		"bound of each etcd request; past it the API answers 503 unavailable")
	knobHistory = registry.Int("FELIX_CP_HISTORY", 10000, 1, 10_000_000,
		"changes the memory store retains for the feed; older cursors get 410 resync (etcd: its compaction decides)")
	knobMaxWait = registry.Duration("FELIX_CP_MAX_WAIT_MS", 60000, 1000, 600000, time.Millisecond,
		"longest long-poll a client may ask for with GET /v1/changes?wait=")
)

// Cluster.
var (
	knobMemberLease = registry.Duration("FELIX_CP_MEMBER_LEASE_MS", 3000, 1000, 600000, time.Millisecond,
		"lease of a registered broker: it disappears this long after its last keepalive (brokers renew at a third) and its ephemeral shards move; etcd rounds up to whole seconds")
	knobReplaceAfter = registry.Duration("FELIX_CP_REPLACE_AFTER_MS", 60000, 100, 604800000, time.Millisecond,
		"how long a replicated shard's member may be absent (its lease lapsed) before its replica moves to another live broker, which catches up from the others")
	knobMaxMoves = registry.Int("FELIX_CP_MAX_MOVES", 2, 0, 1000,
		"replicated shards that rebalancing (a broker added, counts differing by more than one) moves at once, cluster-wide; 0: never rebalance (replacements and manual moves still happen)")
)

// placerConfig is the placer's part of the knobs.
func placerConfig(vals *knob.Values, log *slog.Logger) controlplane.PlacerConfig {
	maxMoves := int(knobMaxMoves.Get(vals))
	if maxMoves == 0 {
		maxMoves = -1 // PlacerConfig's "never"
	}
	return controlplane.PlacerConfig{LeaseTTL: knobMemberLease.Get(vals), ReplaceAfter: knobReplaceAfter.Get(vals), MaxMoves: maxMoves, Logger: log}
}

// Tokens.
var (
	knobTokenTTL = registry.Duration("FELIX_TOKEN_TTL_S", 900, 1, 86400, time.Second,
		"lifetime of the Felix tokens the exchange mints (they cannot be revoked, only outlived)")
	knobOperatorTenant = registry.String("FELIX_CP_OPERATOR_TENANT", "", "a tenant name, or empty",
		"tenant whose admins may create, list and delete tenants and read the changes feed on the main listener, and whose node credentials (POST /v1/token/node) register brokers; empty: only the bootstrap token may", nil)
)

// Process.
var (
	knobShutdownDrain = registry.Duration("FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS", 10000, 0, 600000, time.Millisecond,
		"budget for finishing in-flight requests on SIGTERM/SIGINT (long-polls end at once)")
	knobLogLevel = registry.Enum("FELIX_LOG_LEVEL", "info", []string{"debug", "info", "warn", "error"},
		"minimum level of log lines")
	knobLogFormat = registry.Enum("FELIX_LOG_FORMAT", "text", []string{"text", "json"},
		"log line format on stderr")
	knobAllowUnknown = registry.Bool("FELIX_ALLOW_UNKNOWN_KNOBS", false,
		"start although the environment sets FELIX_CP_* variables that are not knobs (each is then a warning); without it they stop the start (exit 2), naming the closest knob")
)

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func checkEndpoints(s string) error {
	for _, e := range splitList(s) {
		if strings.Contains(e, "://") {
			continue
		}
		if err := knob.CheckHostPort(e); err != nil {
			return errors.New("endpoint " + e + ": " + err.Error())
		}
	}
	return nil
}

func checkPrefix(s string) error {
	if !strings.HasPrefix(s, "/") || !strings.HasSuffix(s, "/") {
		return errors.New("must start and end with /")
	}
	return nil
}
