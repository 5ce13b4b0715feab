package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/felixmq/felix/controlplane/api"
)

const adminUsage = `usage: felix admin KIND VERB [NAME] [flags]
  KIND  tenant | namespace | stream | cache
  VERB  create NAME | list | delete NAME   (tenant also: rotate-keys NAME;
        stream also: shards NAME)
  felix admin shard step-down ...: see felix admin shard -h
Talks to the control plane (--controlplane URL, default make run's embedded
one) with the bearer token in --token-file (default $FELIX_TOKEN, else make
run's token) and prints the answer as JSON. --tenant and --namespace name the
parent of namespaces, streams and caches. Create flags: tenant --idp-file FILE
(a JSON idp object) --display-name; stream --shards --durable --fsync
--retention-bytes --retention-ms --replicas (1, 3 or 5) --ack (leader or
quorum); cache --durable --fsync --max-entries --max-bytes. stream list shows
each stream's replicas and, when replicated, its ack mode. stream shards
shows each shard's owner and replica set from the placement, and the leader
of the moment with each replica's raft state (role, term, commit, followers'
lag) read from its broker's /debug/felix/stats at the admin address it
registered (--admin-token-file: the bearer token those admin APIs require).
A refusal prints the control plane's code and message and exits 1.`

// adminFlags are every admin flag; each kind uses its own.
type adminFlags struct {
	cp                              *cpFlags
	tenant, namespace               string
	idpFile, displayName, fsync     string
	ack, adminTokenFile             string
	shards, replicas                int
	durable                         bool
	retBytes, retMS, maxEnt, maxByt int64
}

func newAdminFlags(stderr io.Writer) (*flag.FlagSet, *adminFlags) {
	set := flag.NewFlagSet("admin", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, adminUsage); set.PrintDefaults() }
	f := &adminFlags{cp: addCPFlags(set, true)}
	set.StringVar(&f.tenant, "tenant", "", "parent tenant `T`")
	set.StringVar(&f.namespace, "namespace", "", "parent namespace `N`")
	set.StringVar(&f.idpFile, "idp-file", "", "tenant create: `FILE` with the idp JSON object")
	set.StringVar(&f.displayName, "display-name", "", "tenant/namespace create: display name")
	set.StringVar(&f.fsync, "fsync", "", "durable stream/cache: on_commit, periodic or never")
	set.IntVar(&f.shards, "shards", 1, "stream create: shards")
	set.BoolVar(&f.durable, "durable", false, "stream/cache create: durable")
	set.IntVar(&f.replicas, "replicas", 0, "durable stream create: replication factor, 1, 3 or 5 (0: the control plane's default, 1)")
	set.StringVar(&f.ack, "ack", "", "replicated stream create: default ack mode, leader or quorum (empty: quorum)")
	set.StringVar(&f.adminTokenFile, "admin-token-file", "", "stream shards: `FILE` with the bearer token of the brokers' admin APIs (none: they are local-only)")
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
	if len(args) < 2 || !slices.Contains(kinds, args[0]) {
		fmt.Fprintln(stderr, adminUsage)
		return exitUsage
	}
	kind, verb := args[0], args[1]
	set, f := newAdminFlags(stderr)
	// Flags may follow the name: parse, take the name, parse the rest.
	if err := set.Parse(args[2:]); err != nil {
		return exitUsage
	}
	var name string
	if rest := set.Args(); len(rest) > 0 {
		name = rest[0]
		if err := set.Parse(rest[1:]); err != nil || set.NArg() > 0 {
			fmt.Fprintln(stderr, "felix admin: one NAME only")
			return exitUsage
		}
	}
	if kind == "stream" && verb == "shards" {
		return f.runShards(name, stdout, stderr)
	}
	method, path, body, err := f.request(kind, verb, name)
	if err == nil {
		err = f.cp.check()
	}
	if err != nil {
		fmt.Fprintln(stderr, "felix admin:", err)
		return exitUsage
	}
	var out json.RawMessage
	if err := f.cp.call(method, path, body, &out); err != nil {
		fmt.Fprintln(stderr, "felix admin:", err)
		return exitFail
	}
	if kind == "stream" && verb == "list" {
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
