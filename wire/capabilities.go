package wire

// Capability negotiation (spec 2.5) is the only negotiation in wire v1; the
// frame version is never negotiated. Capability bits share the u16 space of
// the frame flags:
//
//   - The client sends auth{client_flags} with the set it can decode (the
//     Rust client sends KnownFlags). Omitting client_flags means "original
//     v1 client".
//   - The broker answers auth_ok{server_flags} (its own full set,
//     KnownCapabilities) only when client_flags was present; otherwise it
//     answers a plain ok, and the client must then assume OriginalV1Flags
//     (0x0007) for the broker and fall back to JSON acked publishes.
//   - The broker remembers PeerFlags(client_flags) to decide per subscriber
//     whether live event batches carry base offsets (0x0020).
//   - Each side uses the set the PEER ADVERTISED, never its own constant:
//     Supports(advertised, bit). A publisher with several streams uses the
//     AND of all streams' advertised sets.
//   - Bits a receiver does not know are ignored when it computes the usable
//     set: Negotiate(KnownCapabilities, advertised) drops them. (Unknown bits
//     in a frame header are a different matter: they reject the frame.)
//
// Room for growth: KnownFlags is the set of frame-layout bits and stays
// frozen unless a new layout is added. New capabilities above 0x0020 will be
// added to KnownCapabilities only, so they never widen what ParseHeader
// accepts.

// Capability-only bits (Felix-Go additions). They are never valid in a
// frame header.
const (
	// CapGapNotices: the client understands subscription_gap messages on
	// its event streams. A broker sends them only to clients advertising
	// this bit; others see drops only as offset gaps (with 0x0020) or not
	// at all.
	CapGapNotices Flags = 0x0040
	// CapCache: the peer speaks the cache additions: cache_delete,
	// counter_add / counter_get, watch, and the correlated cache_error
	// reply (message_cache.go). A broker answers a failed cache request
	// with cache_error only to clients advertising this bit; others get
	// the v1 uncorrelated error.
	CapCache Flags = 0x0080
	// CapRoster: the peer speaks the roster messages (roster_join,
	// roster_leave, roster_watch and their replies and events). A broker
	// answers them only on streams whose client advertised it.
	CapRoster Flags = 0x0100
	// CapQueue: the peer speaks the consumer-group queue messages
	// (queue_consume, queue_ack, queue_nack and their replies and events).
	CapQueue Flags = 0x0200
	// CapOwner is FlagAckOwner advertised: the peer decodes owner-naming
	// acks (binary 0x0410, publish_ok/publish_error/error with owner
	// fields) and, from a broker, takes shard-addressed publishes
	// (FlagPublishShard, the JSON "shard" field).
	CapOwner = FlagAckOwner
	// CapShard is FlagPublishShard advertised.
	CapShard = FlagPublishShard
	// CapForwarded marks a stream whose publishes a broker forwards to the
	// shard's owner. A broker receiving a publish on such a stream for a
	// shard it does not own answers not_owner instead of forwarding again,
	// so a publish is forwarded at most once. It is not in
	// KnownCapabilities (an ordinary client must not claim it); brokers
	// advertise it in ServerFlags to say they honour it.
	CapForwarded Flags = 0x1000
	// CapQueueShards: the peer speaks multi-shard consumer groups (the
	// shard field of queue_message, queue_ack and queue_nack). A broker
	// refuses queue_consume on a stream of more than one shard to a peer
	// without it: such a client would drop the shard and could never ack.
	CapQueueShards Flags = 0x2000
)

// KnownCapabilities is every capability bit this package understands: the
// frame layouts plus the capability-only bits.
const KnownCapabilities = KnownFlags | CapGapNotices | CapCache | CapRoster | CapQueue | CapOwner | CapShard | CapQueueShards

// PeerFlags returns the capability set of a peer that sent clientFlags in
// auth (nil = field absent = OriginalV1Flags).
func PeerFlags(clientFlags *uint16) Flags {
	if clientFlags == nil {
		return OriginalV1Flags
	}
	return Flags(*clientFlags)
}

// Supports reports whether every bit of bit is in the peer's set. A zero bit
// is never "supported" so that a mistyped constant fails closed.
func Supports(peer, bit Flags) bool {
	return bit != 0 && peer&bit == bit
}

// Negotiate returns the bits both sides can use: local AND advertised. Pass
// KnownCapabilities as local to ignore bits this build does not know.
func Negotiate(local, advertised Flags) Flags {
	return local & advertised
}
