package api

import (
	"encoding/json"

	"github.com/felixmq/felix/auth"
)

// Tenant is the top of the hierarchy; tokens and RBAC are per tenant.
type Tenant struct {
	Tenant      string `json:"tenant"`
	DisplayName string `json:"display_name,omitempty"`
	// IdP is the identity provider the token exchange trusts for this
	// tenant; nil means no exchange for it.
	IdP *TenantIdP `json:"idp,omitempty"`
	// Revision is assigned by the store (the change that created it).
	Revision int64 `json:"revision,omitempty"`
}

// TenantIdP is the identity provider a tenant trusts for the token
// exchange, and how the IdP's roles map to Felix permissions. It is stored
// with the tenant (Tenant.IdP) so that every control plane on one store
// verifies with the same configuration; auth validates it.
type TenantIdP struct {
	Issuer     string   `json:"issuer"`
	JWKSURL    string   `json:"jwks_url"`
	Audiences  []string `json:"audiences"`
	Algorithms []string `json:"algorithms,omitempty"`
	// ClockSkewMS is tolerated on exp, nbf, iat; 0 means auth's default.
	ClockSkewMS int64 `json:"clock_skew_ms,omitempty"`
	// RolesClaim names the claim with the IdP roles or groups ("roles").
	RolesClaim string `json:"roles_claim,omitempty"`
	// Roles maps a Felix role to its permissions; Bindings maps an IdP
	// role or group value to Felix roles (auth.Policy).
	Roles    map[string][]auth.Permission `json:"roles,omitempty"`
	Bindings map[string][]string          `json:"bindings,omitempty"`
}

// Namespace groups streams and caches inside a tenant.
type Namespace struct {
	Tenant      string `json:"tenant"`
	Namespace   string `json:"namespace"`
	DisplayName string `json:"display_name,omitempty"`
	Revision    int64  `json:"revision,omitempty"`
}

// Stream is a stream's specification. Its JSON is the broker's StreamSpec
// (tenant, namespace, stream, shards, durable, fsync) plus retention, so a
// broker can register a stream from a change record as it is.
type Stream struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Shards    int    `json:"shards"`
	Durable   bool   `json:"durable"`
	// Fsync is the durable stream's commit mode: on_commit, periodic
	// (the default) or never. Empty for ephemeral streams.
	Fsync string `json:"fsync,omitempty"`
	// RetentionBytes and RetentionMS bound each shard's log of a durable
	// stream; 0 keeps everything.
	RetentionBytes int64 `json:"retention_bytes,omitempty"`
	RetentionMS    int64 `json:"retention_ms,omitempty"`
	// Routing maps publish keys to shards: "modulo" (the default, also
	// empty) or "jump_hash". Fixed at creation: streams are never updated.
	Routing string `json:"routing,omitempty"`
	// Replicas is the replication factor of a durable stream's shards: 3
	// or 5, each shard then a raft group over that many brokers; 0 (the
	// control plane stores a stream that is not replicated so, whether
	// it was given 1 or nothing) means 1.
	Replicas int `json:"replicas,omitempty"`
	// Ack is a replicated stream's default ack mode (AckLeader or
	// AckQuorum, the default the control plane fills in); empty when the
	// stream is not replicated.
	Ack      string `json:"ack,omitempty"`
	Revision int64  `json:"revision,omitempty"`
}

// The ack modes of a replicated stream.
const (
	// AckLeader acks a publish once the shard's leader has it, as its
	// fsync mode requires.
	AckLeader = "leader"
	// AckQuorum acks a publish once raft has committed it: a majority of
	// the replicas has it, as their fsync mode requires.
	AckQuorum = "quorum"
)

// ReplicationFactor is s.Replicas with 0 read as 1.
func (s Stream) ReplicationFactor() int { return max(1, s.Replicas) }

// AckMode is s's default ack mode: s.Ack, AckQuorum when a replicated
// stream names none, empty for a stream that is not replicated.
func (s Stream) AckMode() string {
	switch {
	case s.ReplicationFactor() == 1:
		return ""
	case s.Ack == "":
		return AckQuorum
	}
	return s.Ack
}

// Cache is a key/value cache's specification.
type Cache struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Durable   bool   `json:"durable"`
	Fsync     string `json:"fsync,omitempty"`
	// MaxEntries and MaxBytes bound the cache; 0 means unbounded.
	MaxEntries int64 `json:"max_entries,omitempty"`
	MaxBytes   int64 `json:"max_bytes,omitempty"`
	Revision   int64 `json:"revision,omitempty"`
}

// Kind is a resource type.
type Kind string

// The resource kinds, from the top of the hierarchy down: a tenant holds
// namespaces, a namespace holds streams and caches.
const (
	KindTenant    Kind = "tenant"
	KindNamespace Kind = "namespace"
	KindStream    Kind = "stream"
	KindCache     Kind = "cache"
)

// Ref names one resource: its kind and its path, "tenant",
// "tenant/namespace" or "tenant/namespace/name".
type Ref struct {
	Kind Kind   `json:"kind"`
	Path string `json:"key"`
}

func (r Ref) String() string { return string(r.Kind) + " " + r.Path }

// Deleted is the answer to a DELETE.
type Deleted struct {
	Ref
	Revision int64 `json:"revision"`
}

// Snapshot is the whole state at one revision: GET /v1/snapshot. Follow
// the changes feed from its Revision to miss nothing and repeat nothing.
type Snapshot struct {
	Revision   int64       `json:"revision"`
	Tenants    []Tenant    `json:"tenants"`
	Namespaces []Namespace `json:"namespaces"`
	Streams    []Stream    `json:"streams"`
	Caches     []Cache     `json:"caches"`
}

// Op is what a change did.
type Op string

// The operations of the changes feed.
const (
	OpCreated Op = "created"
	OpDeleted Op = "deleted"
)

// Change is one entry of the changes feed.
type Change struct {
	Revision int64 `json:"revision"`
	Op       Op    `json:"op"`
	Ref
	// Object is the created resource; absent for deletions.
	Object json.RawMessage `json:"object,omitempty"`
}

// ChangesPage is the answer to GET /v1/changes.
type ChangesPage struct {
	Changes []Change `json:"changes"`
	// Truncated says the limit cut the page short: more changes follow.
	Truncated bool `json:"truncated"`
	// NextCursor is the cursor of the next request: the revision of the
	// last change returned, or the request's cursor if there was none.
	NextCursor int64 `json:"next_cursor"`
	// Revision is the newest revision the store knew when it answered.
	Revision int64 `json:"revision"`
}
