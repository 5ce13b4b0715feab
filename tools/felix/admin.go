package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/cli"
)

const adminUsage = `usage: felix admin KIND VERB [NAME] [flags]
  KIND  tenant | namespace | stream | cache   (shard: see below)
  VERB  create NAME | list | delete NAME | info NAME
        (tenant also: rotate-keys NAME; stream also: shards NAME)
Talks to the control plane (--controlplane URL, default a local broker's
embedded one) with the bearer token in --token-file (default $FELIX_TOKEN,
else the context's or make run's token) and prints the answer as JSON. The
control plane is where streams and caches live: a broker serves what it
says, and a stream deleted there ends at the broker.

--tenant and --namespace name the parent of namespaces, streams and caches.
Create flags: tenant --idp-file FILE (a JSON idp object) --display-name;
stream --shards --durable --fsync --retention-bytes --retention-ms
--replicas (1, 3 or 5) --ack (leader or quorum); cache --durable --fsync
--max-entries --max-bytes. stream create waits (--wait) until the broker at
--admin serves the stream. A durable stream or cache a broker cannot keep
(no FELIX_DATA_DIR) is refused at creation with the reason. stream list
shows each stream's replicas and, when replicated, its ack mode.

stream info NAME adds to the control plane's record what the broker at
--admin (default a local broker's admin address) serves of the stream: per
shard the first and next offsets (a durable shard's from its log) and the
subscribers, and the consumer groups with their lag.

stream shards NAME shows each shard's owner and replica set from the
placement, and the leader of the moment with each replica's raft state
(role, term, commit, followers' lag) read from its broker's
/debug/felix/stats at the admin address it registered (--admin-token-file:
the bearer token those admin APIs require).

felix admin shard (list, move, leader, step-down) shows and moves
replicated shards' replicas and leaderships: see felix admin shard -h.

A refusal prints the control plane's code and message and exits 1.`

// adminFlags are every admin flag; each kind uses its own.
type adminFlags struct {
	cp                              *cpFlags
	tenant, namespace, admin        string
	idpFile, displayName, fsync     string
	ack, adminTokenFile             string
	shards, replicas                int
	durable                         bool
	wait                            time.Duration
	retBytes, retMS, maxEnt, maxByt int64
}

func newAdminFlags() (*flag.FlagSet, *adminFlags) {
	set := flag.NewFlagSet("felix admin", flag.ContinueOnError)
	f := &adminFlags{cp: addCPFlags(set, true)}
	set.StringVar(&f.tenant, "tenant", f.cp.ep.Tenant.V, "parent tenant `T` (else $FELIX_TENANT, the context)")
	set.StringVar(&f.namespace, "namespace", "default", "parent namespace `N`")
	set.StringVar(&f.admin, "admin", f.cp.ep.Admin.V, "stream info: the broker's admin `host:port` or URL (else $FELIX_ADMIN, the context, a local broker's)")
	set.StringVar(&f.idpFile, "idp-file", "", "tenant create: `FILE` with the idp JSON object")
	set.StringVar(&f.displayName, "display-name", "", "tenant/namespace create: display name")
	set.StringVar(&f.fsync, "fsync", "", "durable stream/cache: on_commit, periodic or never")
	set.IntVar(&f.shards, "shards", 1, "stream create: shards")
	set.BoolVar(&f.durable, "durable", false, "stream/cache create: durable")
	set.IntVar(&f.replicas, "replicas", 0, "durable stream create: replication factor, 1, 3 or 5 (0: the control plane's default, 1)")
	set.StringVar(&f.ack, "ack", "", "replicated stream create: default ack mode, leader or quorum (empty: quorum)")
	set.StringVar(&f.adminTokenFile, "admin-token-file", "", "stream shards: `FILE` with the bearer token of the brokers' admin APIs (none: they are local-only)")
	set.DurationVar(&f.wait, "wait", 10*time.Second, "stream create: wait up to `D` until the broker at --admin serves it, if one is named (0: do not wait)")
	set.Int64Var(&f.retBytes, "retention-bytes", 0, "durable stream: bytes kept per shard (0: all)")
	set.Int64Var(&f.retMS, "retention-ms", 0, "durable stream: age kept (0: all)")
	set.Int64Var(&f.maxEnt, "max-entries", 0, "cache: entry bound (0: none)")
	set.Int64Var(&f.maxByt, "max-bytes", 0, "cache: byte bound (0: none)")
	return set, f
}

// collection is the API path of kind's collection under the parent flags.
func (f *adminFlags) collection(kind string) (string, error) {
	need := map[string]int{"tenant": 0, "namespace": 1, "stream": 2, "cache": 2}[kind]
	if need >= 1 && f.tenant == "" || need == 2 && f.namespace == "" {
		return "", fmt.Errorf("%s needs --tenant%s", kind, map[bool]string{true: " and --namespace"}[need == 2])
	}
	p := "/v1/tenants"
	if need >= 1 {
		p += "/" + f.tenant + "/namespaces"
	}
	if need == 2 {
		p += "/" + f.namespace + "/" + map[string]string{"stream": "streams", "cache": "caches"}[kind]
	}
	return p, nil
}

// body is the create request of kind named name.
func (f *adminFlags) body(kind, name string) (any, error) {
	switch kind {
	case "tenant":
		t := api.Tenant{Tenant: name, DisplayName: f.displayName}
		if f.idpFile != "" {
			raw, err := os.ReadFile(f.idpFile)
			if err != nil {
				return nil, fmt.Errorf("--idp-file: %w", err)
			}
			t.IdP = new(api.TenantIdP)
			if err := json.Unmarshal(raw, t.IdP); err != nil {
				return nil, fmt.Errorf("--idp-file %s: %w", f.idpFile, err)
			}
		}
		return t, nil
	case "namespace":
		return api.Namespace{Namespace: name, DisplayName: f.displayName}, nil
	case "stream":
		return api.Stream{Stream: name, Shards: f.shards, Durable: f.durable, Fsync: f.fsync,
			RetentionBytes: f.retBytes, RetentionMS: f.retMS, Replicas: f.replicas, Ack: f.ack}, nil
	}
	return api.Cache{Cache: name, Durable: f.durable, Fsync: f.fsync, MaxEntries: f.maxEnt, MaxBytes: f.maxByt}, nil
}

func runAdmin(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "shard" {
		return runAdminShard(args[1:], stdout, stderr)
	}
	kinds := []string{"tenant", "namespace", "stream", "cache"}
	set, f := newAdminFlags()
	if len(args) > 0 && cli.IsHelp(args[0]) {
		return cli.Fail(cli.ErrHelp, "felix admin", adminUsage, set, stdout, stderr)
	}
	pos, err := cli.Parse(set, args)
	if err == nil && (len(pos) < 2 || !slices.Contains(kinds, pos[0])) {
		err = errors.New("want KIND VERB [NAME]")
	}
	if err == nil && len(pos) > 3 {
		err = errors.New("one NAME only")
	}
	var method, path string
	var body any
	if err == nil {
		pos = append(pos, "")
		if pos[0] == "stream" && pos[1] == "shards" && pos[2] != "" {
			return f.runShards(pos[2], stdout, stderr)
		}
		method, path, body, err = f.request(pos[0], pos[1], pos[2])
	}
	if err == nil {
		err = f.cp.check()
	}
	if err != nil {
		return cli.Fail(err, "felix admin", adminUsage, set, stdout, stderr)
	}
	var out json.RawMessage
	if err := f.cp.call(method, path, body, &out); err != nil {
		fmt.Fprintln(stderr, "felix admin:", err)
		return exitFail
	}
	switch {
	case pos[0] == "stream" && pos[1] == "info":
		return f.streamInfo(out, pos[2], stdout, stderr)
	case pos[0] == "stream" && pos[1] == "create":
		named := f.cp.ep.Admin.From != "default"
		set.Visit(func(fl *flag.Flag) { named = named || fl.Name == "admin" })
		if named {
			f.awaitServed(pos[2], stderr)
		}
	case pos[0] == "stream" && pos[1] == "list":
		if out, err = withReplication(out); err != nil {
			fmt.Fprintln(stderr, "felix admin: the control plane's stream list:", err)
			return exitFail
		}
	}
	stdout.Write(append(out, '\n'))
	return exitOK
}

// withReplication states each listed stream's replication factor (and
// ack mode, for a replicated one), which the control plane leaves out for
// a stream that is not replicated, so that the list shows them for every
// stream. It re-encodes the list as api.Stream: a field this CLI does not
// know (a newer control plane's) is not shown.
func withReplication(raw json.RawMessage) (json.RawMessage, error) {
	var page struct {
		Streams  []api.Stream `json:"streams"`
		Revision int64        `json:"revision"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, err
	}
	for i := range page.Streams {
		s := &page.Streams[i]
		s.Replicas, s.Ack = s.ReplicationFactor(), s.AckMode()
	}
	return json.MarshalIndent(page, "", "  ")
}

// awaitServed waits, up to --wait, until the broker at --admin serves the
// stream just created: it learns of it from the control plane's changes
// feed, so a publish right after create would otherwise race it. Not
// served in time is a warning, not a failure: the record exists, and a
// broker of a cluster that does not own the stream never serves it. Only
// a broker something names is waited for (--admin, $FELIX_ADMIN, the
// context, a local broker's dev directory): the built-in default address
// is a guess, and a cluster created through its control plane has no
// broker there (every create waited the whole 10 s, with a warning).
func (f *adminFlags) awaitServed(name string, stderr io.Writer) {
	if f.admin == "" || f.wait <= 0 {
		return
	}
	cl, err := f.brokerClient()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.wait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if cl.Do(ctx, http.MethodGet, f.streamPath(name), nil, nil) == nil {
			return
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "felix admin: created; the broker at %s does not serve it after %v\n", f.admin, f.wait)
			return
		case <-tick.C:
		}
	}
}

// brokerClient calls the admin API of the broker at --admin.
func (f *adminFlags) brokerClient() (*api.Client, error) {
	base := f.admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return api.NewClient(api.ClientConfig{URL: base, RequestTimeout: f.cp.timeout, Token: func() string { tok, _ := f.cp.bearer(); return tok }})
}

func (f *adminFlags) streamPath(name string) string {
	return "/v1/streams/" + f.tenant + "/" + f.namespace + "/" + name
}

// streamInfo prints the control plane's record of a stream with what the
// broker at --admin serves of it.
func (f *adminFlags) streamInfo(spec json.RawMessage, name string, stdout, stderr io.Writer) int {
	info := map[string]any{"stream": spec}
	var served json.RawMessage
	cl, err := f.brokerClient()
	if err == nil {
		err = cl.Do(context.Background(), http.MethodGet, f.streamPath(name), nil, &served)
	}
	if err != nil {
		info["broker_error"] = fmt.Sprintf("broker %s: %v", f.admin, err)
	} else {
		info["broker"] = served
	}
	raw, _ := json.MarshalIndent(info, "", "  ")
	stdout.Write(append(raw, '\n'))
	if err != nil {
		fmt.Fprintf(stderr, "felix admin: the broker at %s does not describe the stream: %v\n", f.admin, err)
		return exitFail
	}
	return exitOK
}

// request maps kind, verb and name onto an API call.
func (f *adminFlags) request(kind, verb, name string) (method, path string, body any, err error) {
	coll, err := f.collection(kind)
	if err != nil {
		return "", "", nil, err
	}
	needName := verb != "list"
	if needName != (name != "") {
		return "", "", nil, fmt.Errorf("%s %s takes %s", kind, verb, map[bool]string{true: "a NAME", false: "no NAME"}[needName])
	}
	switch verb {
	case "list":
		return "GET", coll, nil, nil
	case "info":
		return "GET", coll + "/" + name, nil, nil
	case "delete":
		return "DELETE", coll + "/" + name, nil, nil
	case "create":
		b, err := f.body(kind, name)
		return "POST", coll, b, err
	case "rotate-keys":
		if kind == "tenant" {
			return "POST", coll + "/" + name + "/keys/rotate", nil, nil
		}
	}
	return "", "", nil, fmt.Errorf("unknown verb %q for %s", verb, kind)
}
