// Package api is the control plane's HTTP API as its clients see it: every
// request and response body, the error body, and one HTTP client with a
// deadline on every request. The broker's control-plane follower and
// embedded control plane (cmd/felix-broker), the felix CLI, ClusterClient
// and the server itself (controlplane) share these types, so a change to
// the contract is one change here.
//
// # What it owns
//
//   - The bodies: resources (Tenant with its TenantIdP, Namespace, Stream,
//     Cache), the feed (Snapshot, ChangesPage of Change), tokens
//     (ExchangeRequest, NodeTokenRequest, ...), membership
//     (RegisterRequest, KeepAliveRequest, MembersResponse, ...; the
//     placement itself is a cluster.Placement).
//   - ErrorBody and Error: a refusal with its status, matching ErrNotFound,
//     ErrUnauthorized, ErrConflict or ErrResync.
//   - Client: JSON in and out, a bearer credential asked per request,
//     RequestTimeout on every call (Poll adds the long-poll's wait).
//   - The two long-lived clients a broker runs: Agent keeps it registered
//     (a lease renewed at a third of its TTL, the node credential renewed
//     half-way through its life) and Watcher follows the placement
//     (long-polls GET /v1/placement, keeps the last one through outages).
//
// Membership and placement endpoints (docs/cluster.md has the rules):
//
//	POST /v1/members                {"id","quic_addr","admin_addr","zone"}
//	     → 200 {"member":Member,"lease_ttl_ms":N}
//	     Registers (or re-registers) a broker under a lease of lease_ttl_ms.
//	     Requires a Felix token with the "node" permission.
//	POST /v1/members/{id}/keepalive [{"load":[{tenant,namespace,stream,shard,bytes_per_s}...]}]
//	     → 200 {"lease_ttl_ms":N}; 404 when the lease has lapsed (the
//	     broker registers again). The optional body reports the publish
//	     rate of each shard the broker owns; placement uses it the next time
//	     a member or stream change recomputes it, never by itself.
//	DELETE /v1/members/{id}         graceful leave.
//	GET  /v1/members                → {"members":[Member...]} (live only)
//	GET  /v1/placement[?after=V&wait_ms=N]
//	     → Placement. With after, long-polls until Version > after or
//	     wait_ms passes (then 200 with the current placement).
//	     Readable with any valid Felix token of the cluster (brokers use the
//	     node credential, ClusterClient the user's token).
//
// # What it must not do
//
// Import the control plane's server or its stores (so a client links
// neither etcd nor the server), the broker or the client SDK.
//
// # Concurrency
//
// Client is safe for concurrent use and starts no goroutine. Agent and
// Watcher each run one goroutine (pprof labels felix-cluster-agent and
// felix-cluster-watch) from their constructor to Close, which stops it and
// waits.
package api
