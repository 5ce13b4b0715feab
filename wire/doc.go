// Package wire is the Felix wire v1 codec: the 12-byte frame header, the
// JSON control messages and the binary publish / ack / event batch layouts,
// byte-compatible with the published Rust Felix (felix-wire v1). The
// protocol as we implement it is written up in docs/protocol.md; the golden
// frames are in testdata/vectors.
//
// # What it owns, what it must not do
//
// It owns encoding into caller-provided buffers (Append* functions and
// Message.AppendJSON) and decoding from byte slices, with strict validation.
// It does no I/O: no io.Reader, no connections, no goroutines, no logging.
// Framing a byte stream is the caller's job, with ParseHeader for the first
// 12 bytes and SplitFrame for buffers that hold whole frames. Every function
// is safe for concurrent use on distinct arguments.
//
// # Validation
//
// Decoders never panic on input and every error they return satisfies
// errors.Is with one sentinel from errors.go; the typed errors there carry
// the field and the sizes. Lengths are checked against the bytes that
// remain before anything is sliced or allocated; a payload count is bounded
// by remaining/4 first (a 20-byte frame once made the Rust decoder reserve
// ~100 GiB); the header's length is checked against the frame cap
// (DefaultMaxFrameBytes, 16 MiB) before a reader would size a buffer from
// it. Decoders allocate O(frame length) at most, and nothing in the steady
// state. Bytes after a complete binary body are an error, as are names and
// messages that are not valid UTF-8.
//
// # Zero-copy lifetimes
//
// The binary decoders (DecodePublishBatch, DecodeAckedPublish,
// DecodeEventBatch) fill a caller-owned struct and do not copy payloads: the
// Payloads slices alias the frame buffer and are valid only while that
// buffer is neither reused nor modified. Decoding into the same struct again
// reuses its Payloads array and, when the bytes are unchanged, its name
// strings, so decoding a batch allocates nothing once warm. DecodeJSON and
// DecodePublishAck copy what they return.
//
// # Flags and capabilities
//
// The header's u16 flags select a layout (KindFromFlags): 0 (JSON); a
// publish 0x0001 with at most one of keyed (0x0040) or shard-addressed
// (0x8000, Felix-Go), plain, acked (0x0008) or idempotent (0x0108), with or
// without headers (0x0080, Felix-Go); an ack 0x0010 with any of owner
// (0x0080), code (0x0200, with detail 0x0400), offset (0x1000) and shard
// (0x8000); and the event batches 0x0002 and 0x0004 with any of offsets
// (0x0020), publisher (0x2000), timestamps (0x4000) and headers (0x0080,
// Felix-Go). The bit numbers are the published Felix 0.6's. A bit outside
// KnownFlags (0xF7FF) rejects the frame with ErrUnknownFlags;
// it is never masked, because a bit we do not know may change the layout.
// Known bits in another combination are ErrInvalidFlags. Both are
// recoverable: ParseHeader still returns the length so the stream can skip
// the frame.
//
// The same u16 space is the frame-flag set exchanged at auth
// (auth.client_flags, auth_ok.server_flags), beside the published feature
// word (client_features) and our own capability word (client_caps);
// capabilities.go gives the rules. Typed error codes are errorcode.go, the
// key-to-shard routing function routing.go.
//
// # Where code and docs disagree
//
// The published Felix's code is followed over its docs
// (docs/protocol.md, "Deviations and choices"): request_id is a u64, not a string; subscribe is answered with
// subscribed, not ok; cache messages carry tenant_id/namespace/cache.
// Choices of our own:
//
//   - JSON is decoded with serde's rules (see DecodeJSON) except that
//     strings with invalid UTF-8 or lone-surrogate escapes are rejected, and
//     duplicate keys keep the last value where serde would fail.
//   - The JSON encoders write serde_json's exact bytes (escaping,
//     field order, ttl_ms:null, value:null) by hand; encoding/json is used
//     only to decode.
//   - A binary publish ack with status ok and a non-empty message decodes;
//     the spec says such a message is empty, and our encoder writes what it
//     is given.
//   - Empty names decode (the spec does not forbid them); policy about
//     them belongs to the broker.
//
// # Felix-Go additions
//
// New optional fields are written last and omitted when nil (publish and
// subscribe "shard", the owner fields), so a v1 message is byte-identical
// whether or not the sender knows them. New message types (subscription_gap)
// are sent only to peers that advertised the capability bit introducing them
// (CapGapNotices, 0x0040 in client_caps). Capability bits are never valid in
// a frame header. Rosters (roster_* messages, CapRoster 0x0100, message_roster.go)
// and consumer-group queues (queue_* messages, CapQueue 0x0200,
// message_queue.go) are whole message families added this way.
package wire
