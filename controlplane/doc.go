// Package controlplane is Felix's control plane: the HTTP/JSON API for
// tenants, namespaces, streams and caches, a snapshot plus a changes feed that
// never skips an entry, and a long-poll watch through which brokers learn of
// changes within a second.
//
// It owns (docs/design.md, "Packages"): the server of the API, its
// validation and error mapping, the Store interface with an in-memory
// backend (the default) and an etcd backend for clusters, brokers'
// membership and the shard placement. The request and response bodies are
// controlplane/api's, shared with every client; the store speaks them too
// (Kind, Ref, Op and Change are the API's). It must not sit on the data
// path, and it must not import broker/ or client/: brokers reach it over
// HTTP.
//
// # The changes feed
//
// Every mutation gets a revision from the store; revisions only grow. A
// reader takes GET /v1/snapshot (the whole state and its revision R), then
// pages GET /v1/changes?cursor=R. A page holds every change after the cursor
// in revision order, up to the limit; a page cut short by the limit says
// truncated:true and its next_cursor is the revision of its last change, so
// the next page starts exactly after it. This fixes the published Felix, whose
// changes feed returned the global tail as the next cursor even for a
// truncated page and so skipped entries. A cursor older than the retained
// history (or newer than the store, which means the store was replaced)
// answers 410 with code "resync" and the current revision: the reader takes a
// new snapshot instead of silently missing changes.
//
// Every change touches exactly one resource, so one revision names one
// change and a cursor never falls in the middle of a revision. That is why
// deleting a tenant or namespace that still has children is refused (409
// not_empty) rather than cascaded.
//
// # Authorization
//
// Every endpoint except the health probe, the OpenAPI document, the token
// exchange and the tenant JWKS goes through
// Config.Authorizer. The zero Config refuses every such request: the
// published Felix served its admin API unauthenticated, and an open admin API
// must never be the default. BootstrapAuthorizer admits a day-0 bootstrap token
// and is meant for its own (loopback) listener.
//
// FelixTokenAuthorizer admits Felix tokens (from the token exchange),
// verified locally with the control plane's own keys and mapped onto
// auth.Check: a tenant's admin manages everything in it, ns.manage,
// stream.manage and cache.manage their kind, any valid token of the tenant
// reads its resources, and tenant creation, tenant listing and the feed
// belong to the operator tenant's admins (or the bootstrap token). A token
// of tenant A is refused (403) on tenant B before any key of B is read.
// cmd/felix-controlplane serves it on the main listener and AnyOf{bootstrap,
// Felix} on the bootstrap listener.
//
// # Tokens and keys
//
// POST /v1/token/exchange (public: the IdP token is the credential)
// verifies an IdP token against the tenant's idp object and mints a Felix
// EdDSA token; GET /v1/tenants/{t}/.well-known/jwks.json (public, max-age
// 60) serves the tenant's current and previous public keys; POST
// /v1/tenants/{t}/keys/rotate rotates. Tokens keeps each tenant's key set,
// private keys included, in the Store under the hidden kind tenant_key so
// that control planes on one etcd mint with the same keys. It is hidden by
// construction: not in Kinds, so ParseStoreKey rejects its keys and the
// etcd store's List, Snapshot and Changes skip them; the snapshot handler
// ignores kinds it does not know, and publicChanges drops it from the
// memory store's feed (the cursor still advances past it). No route reads
// it by name. It does cost a revision: a tenant's creation is two changes.
// Before each use Tokens rereads the stored key set and tenant and
// reinstalls them when their revision moved, so a rotation or IdP change
// made through another control plane applies on the next request.
//
// # Cluster membership and placement
//
// Brokers register (POST /v1/members) with a node credential, a Felix token
// of the operator tenant granting cluster.node (POST /v1/token/node mints
// one: the bootstrap token on the bootstrap listener, an operator admin, or
// a node credential renewing itself), and keep a lease alive. Both stores
// implement MemberStore: the etcd store attaches each member's key to an
// etcd lease of its own, so a broker killed with kill -9 disappears when
// the lease lapses even if the control plane that registered it died too;
// the memory store emulates leases with a timer. A Placer recomputes
// cluster.Place on every change the store reports (members, lapsed leases,
// streams) and stores the result with a compare-and-swap on its version,
// so several control planes on one etcd agree without electing a leader.
// Brokers' load reports (keepalive bodies) are stored without waking it and
// read at the next recompute. GET /v1/placement long-polls it. docs/cluster.md has the rules and the
// "owner unavailable" behaviour of durable shards. A replicated stream
// (replicas 3 or 5) is created only while at least as many brokers are
// live (Server.admit): its shards would wait unassigned otherwise.
//
// # Concurrency
//
// Server, Tokens, Placer and both stores are safe for concurrent use.
// Tokens has one mutex, held across store calls only when creating,
// rotating or deleting keys (rare writes that must not interleave); auth's
// Minter and IdPVerifier locks are taken under it, never the reverse. An
// EtcdStore runs up to two goroutines: the watch that keeps its tail of
// recent changes (pprof label goroutine=felix-cp-etcd-tail), started by the
// first snapshot or feed read, and the watch behind Notify
// (goroutine=felix-cp-etcd-notify), started by the first Notify;
// EtcdStore.Close stops both and waits for them. A MemoryStore's lease
// timer runs its callback under the store's mutex. A Placer runs one
// goroutine (goroutine=felix-cp-placer) from NewPlacer to Close; a Server
// that made its own Placer closes it. Server.Close ends pending long-polls
// so that an http.Server can shut down without waiting out a 30-second
// wait; it does not close a Store or Placer the caller passed in.
package controlplane
