// Package controlplane is Felix's control plane: the HTTP/JSON API for
// tenants, namespaces, streams and caches, a snapshot plus a changes feed that
// never skips an entry, and a long-poll watch through which brokers learn of
// changes within a second.
//
// It owns (DESIGN.md section 1): the API, its validation and error format,
// the Store interface with an in-memory backend (the default) and an etcd
// backend for clusters. It must not sit on the data path, and it must not
// import broker/ or client/: brokers reach it over HTTP.
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
// Every endpoint except the health probe and the OpenAPI document goes through
// Config.Authorizer. The zero Config refuses every such request: the
// published Felix served its admin API unauthenticated, and an open admin API
// must never be the default. BootstrapAuthorizer admits a day-0 bootstrap token
// and is meant for its own (loopback) listener.
//
// # Concurrency
//
// Server and both stores are safe for concurrent use. An EtcdStore runs one
// goroutine, the watch that keeps its tail of recent changes (pprof label
// goroutine=felix-cp-etcd-tail); the first snapshot or feed read starts it
// and EtcdStore.Close stops it and waits for it. Server.Close ends
// pending long-polls so that an http.Server can shut down without waiting
// out a 30-second wait; it does not close a Store the caller passed in.
package controlplane
