// Package floor measures what an acked publish cannot go below on this
// machine: a bare quic-go request/response between two processes, on the
// udp conn, TLS configuration and QUIC configuration the broker and the
// client use (QUICConfig of each), with the bytes of an acked publish and
// of its ack; a raw 4 KiB append + fdatasync on a preallocated file,
// as a segment is written and synced; and the bare round trip whose server
// appends and syncs each request before answering it (the floor of a
// durable on_commit publish). felix-loadgen --floor and
// BenchmarkFloor put the broker's figures next to these.
//
// The server side of every yardstick runs in a child process (Child): the
// bare echo server is ServeEcho, which the loadgen binary and the
// benchmark's test binary run when started with ChildEnv set. A child
// answers "stats" on its stdin with its CPU time, its OS threads' wake-ups
// and its socket's packet counts, so that costs are counted per round trip
// on both sides; it exits when its stdin closes.
//
// Platforms: CPU and wake-up counts come from /proc (Linux); elsewhere
// they are zero and the figures say n/a.
package floor
