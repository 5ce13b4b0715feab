// Package broker is the Felix broker: QUIC connections and their streams,
// request dispatch, the stream registry with its shards (ordering, offsets,
// the in-memory ring), delivery to subscribers through fanout, the admin HTTP
// endpoints, and graceful drain.
//
// # Stream topology (docs/protocol.md)
//
// Every QUIC stream a client opens starts with an `auth` frame. Control
// streams are bidirectional: the client sends requests, the broker answers on
// the same stream through a single writer goroutine, and acks may complete out
// of order. Publish streams are client-opened unidirectional streams that
// carry only publishes and get no replies. Each subscription gets one
// broker-opened unidirectional event stream that begins with
// `event_stream_hello`; `subscribed` is sent on the control stream before any
// replay, so a replay larger than the QUIC windows cannot deadlock.
//
// # Concurrency
//
// One goroutine reads each QUIC stream and applies its publishes to the
// shards synchronously: when a shard cannot take more (a Block subscriber is
// full) the reader stops reading and QUIC flow control pushes back on the
// client, so fire-and-forget publishes are never dropped silently. One writer
// goroutine per control stream serialises replies; one goroutine per
// subscription drains its fanout queue onto its event stream. A slow
// subscriber therefore only fills its own queue (and, under the Block policy,
// makes publishers wait by design).
//
// Lock order: shard.idem.mu (idempotent producers), then shard.mu, then
// fanout queue locks (taken inside fanout).
// Registry.mu is never held while a shard lock is taken. Rosters:
// rosterSet.mu, then roster.mu, then fanout queue locks. Consumer groups:
// groupSet.mu, then groupShard.mu, then shard.mu (the tail); a shard only
// signals a group's channel, never takes its lock. conn.mu is a leaf.
//
// Rosters (roster.go) and consumer groups (group_*.go, the "queue" messages) are
// Felix-Go additions behind capability bits 0x0100 and 0x0200; their
// design comments say how the snapshot meets the changes without a gap and
// how a record is out to at most one member at a time.
//
// Cluster mode (cluster.go): SetPlacement hands the broker the control
// plane's placement, indexed once per version and swapped in through an
// atomic pointer (no lock: the publish path loads it once per publish, and
// with no placement pays only that nil check). A publish for another
// broker's shard goes to Config.Forwarder, which calls back with the owner's
// ack from its own goroutine; the broker's inflight count covers it until
// then, so Drain waits for forwarded publishes too. Subscribes for another
// broker's shard are refused with not_owner. See docs/protocol.md "Cluster".
//
// What the broker must not do: block a publisher on a subscriber (except
// under the documented Block policy).
package broker
