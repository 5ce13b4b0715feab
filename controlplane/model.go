package controlplane

import (
	"slices"

	"github.com/felixmq/felix/controlplane/api"
)

// The resources as the generic handlers (handlers.go) see them: the API's
// bodies with the validation, store reference and path binding of each.
// Their JSON is the API's.
type (
	tenantRes    api.Tenant
	namespaceRes api.Namespace
	streamRes    api.Stream
	cacheRes     api.Cache
)

// Limits of the resource fields.
const (
	MaxShards      = 1024 // the broker's bound on one stream's shards
	MaxNameLen     = 64
	MaxDisplayName = 256
	DefaultFsync   = "periodic"
)

var fsyncModes = []string{"on_commit", "periodic", "never"}

// replicaCounts are the replication factors a stream may have.
var replicaCounts = []int{1, 3, 5}

// ValidName reports why name cannot name a tenant, namespace, stream or
// cache, or nil. Names are URL path segments, store key segments and RBAC
// resource segments at once, so they are kept to a small alphabet: no '/',
// no '*' (the RBAC wildcard), nothing that needs escaping.
func ValidName(what, name string) error {
	const rule = "use 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
	if name == "" {
		return invalid("%s is missing: %s", what, rule)
	}
	if len(name) > MaxNameLen {
		return invalid("%s %q is %d bytes long: %s", what, name, len(name), rule)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return invalid("%s %q has %q at byte %d: %s", what, name, rune(c), i, rule)
		}
	}
	return nil
}

func validDisplayName(s string) error {
	if len(s) > MaxDisplayName {
		return invalid("display_name is %d bytes long: at most %d", len(s), MaxDisplayName)
	}
	return nil
}

// validFsync checks a durable resource's fsync mode, filling the default.
func validFsync(durable bool, fsync *string) error {
	if !durable {
		if *fsync != "" {
			return invalid("fsync %q applies to durable resources only (set durable: true)", *fsync)
		}
		return nil
	}
	if *fsync == "" {
		*fsync = DefaultFsync
	}
	for _, m := range fsyncModes {
		if *fsync == m {
			return nil
		}
	}
	return invalid("fsync %q: want on_commit, periodic or never", *fsync)
}

func nonNegative(field string, v int64) error {
	if v < 0 {
		return invalid("%s %d must not be negative (0 means unbounded)", field, v)
	}
	return nil
}

func (t *tenantRes) validate() error {
	if err := ValidName("tenant", t.Tenant); err != nil {
		return err
	}
	if t.IdP != nil {
		if err := validateIdP(t.IdP, t.Tenant); err != nil {
			return err
		}
	}
	return validDisplayName(t.DisplayName)
}

func (n *namespaceRes) validate() error {
	if err := ValidName("namespace", n.Namespace); err != nil {
		return err
	}
	return validDisplayName(n.DisplayName)
}

func (s *streamRes) validate() error {
	if err := ValidName("stream", s.Stream); err != nil {
		return err
	}
	if s.Shards < 1 || s.Shards > MaxShards {
		return invalid("shards %d not in [1, %d]", s.Shards, MaxShards)
	}
	if err := validFsync(s.Durable, &s.Fsync); err != nil {
		return err
	}
	if !s.Durable && (s.RetentionBytes != 0 || s.RetentionMS != 0) {
		return invalid("retention_bytes and retention_ms apply to durable streams only (set durable: true)")
	}
	if s.Routing != "" && s.Routing != "modulo" && s.Routing != "jump_hash" {
		return invalid("routing %q: want modulo or jump_hash", s.Routing)
	}
	if err := nonNegative("retention_bytes", s.RetentionBytes); err != nil {
		return err
	}
	if err := nonNegative("retention_ms", s.RetentionMS); err != nil {
		return err
	}
	return validReplication(s.Durable, &s.Replicas, &s.Ack)
}

// validReplication checks a stream's replication factor and ack mode,
// filling the default ack of a replicated stream (quorum). A stream that
// is not replicated is stored without either, whether replicas was
// omitted or 1, so that its JSON is what it was before replication.
// Whether enough brokers are live is checked at creation (Server.admit),
// not here.
func validReplication(durable bool, replicas *int, ack *string) error {
	if *replicas != 0 && !slices.Contains(replicaCounts, *replicas) {
		return invalid("replicas %d: want 1, 3 or 5 (an odd count: a majority of the replicas commits)", *replicas)
	}
	if *replicas <= 1 {
		if *ack != "" {
			return invalid("ack %q applies to replicated streams only (set replicas: 3 or 5)", *ack)
		}
		*replicas = 0
		return nil
	}
	if !durable {
		return invalid("replicas %d: only a durable stream is replicated (set durable: true)", *replicas)
	}
	switch *ack {
	case "":
		*ack = api.AckQuorum
	case api.AckLeader, api.AckQuorum:
	default:
		return invalid("ack %q: want leader or quorum", *ack)
	}
	return nil
}

func (c *cacheRes) validate() error {
	if err := ValidName("cache", c.Cache); err != nil {
		return err
	}
	if err := validFsync(c.Durable, &c.Fsync); err != nil {
		return err
	}
	if err := nonNegative("max_entries", c.MaxEntries); err != nil {
		return err
	}
	return nonNegative("max_bytes", c.MaxBytes)
}

// samePath checks a body field naming a path segment: empty takes the
// path's value, anything else must equal it.
func samePath(field string, body *string, path string) error {
	if *body == "" {
		*body = path
		return nil
	}
	if *body != path {
		return invalid("%s %q in the body does not match %q in the path", field, *body, path)
	}
	return nil
}

func (t *tenantRes) ref() Ref    { return Ref{Kind: KindTenant, Path: t.Tenant} }
func (n *namespaceRes) ref() Ref { return Ref{Kind: KindNamespace, Path: n.Tenant + "/" + n.Namespace} }
func (s *streamRes) ref() Ref {
	return Ref{Kind: KindStream, Path: s.Tenant + "/" + s.Namespace + "/" + s.Stream}
}
func (c *cacheRes) ref() Ref {
	return Ref{Kind: KindCache, Path: c.Tenant + "/" + c.Namespace + "/" + c.Cache}
}
