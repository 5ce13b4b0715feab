// Package client is the Go SDK for Felix: Dial a broker, publish (acked and
// pipelined, fire-and-forget, batched; binary encoding when the broker
// advertises it; an acked publish's Result says the shard and offset it
// landed at), publish exactly once through an IdempotentPublisher (it
// redials and re-sends unanswered batches under their sequence, and the
// broker writes each once), and subscribe (events with offsets, and gap reports when the
// broker's queue for this subscriber dropped events), follow rosters
// (Roster: Join, Leave, Watch with a snapshot then changes) and consume
// durable streams in consumer groups (Consume: Next, Ack, Nack; at-least-once).
//
// One Client is one QUIC connection. Every QUIC stream it opens starts with
// an auth frame (the protocol authenticates streams, not connections). A
// Publisher owns one control stream; a Subscription owns the short control
// stream that created it and the event stream the broker opened for it.
//
// Goroutines: a Client runs one goroutine that accepts the broker's event
// streams and routes them by their event_stream_hello; each Publisher runs
// one reader of its replies; each Subscription, RosterWatch and
// QueueConsumer one reader of its events; each QueueConsumer one reader of
// its ack replies.
// Close on any of them waits for its goroutines. Errors are never hidden:
// a publish that fails returns the broker's message, a subscription whose
// stream ends returns why from Next. A broker's refusal carries its typed
// code and retry class (BrokerError.Code and Retry); RetryOf says what may
// be done about any error a call returned. An IdempotentPublisher runs one
// reader of its answers per connection and one goroutine that redials and
// re-sends.
package client
