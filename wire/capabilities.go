package wire

// Negotiation (the frame version is never negotiated) happens in the auth
// exchange, in three independent words:
//
//   - client_flags / server_flags (u16): frame-flag bits (flags.go). The
//     client offers the bits it can decode and send (KnownFlags); the
//     broker answers auth_ok{server_flags} with its own full set only when
//     client_flags was present, otherwise a plain ok, and the client must
//     then assume OriginalV1Flags (0x0007). A sender uses a bit only if the
//     peer advertised it.
//   - client_features / server_features (u32, optional): the published
//     Felix's feature bits (Features below): requests a broker serves and
//     answers a client can decode. Absent means none.
//   - client_caps / server_caps (u32, optional, Felix-Go): the capability
//     bits of our own additions (gap notices, caches, rosters, queues,
//     forwarding). They shared the frame-flag word before the published
//     Felix gave 0x0040-0x1000 frame meanings; they keep their old values,
//     in their own field. Within this package they ride in the high 16
//     bits of a Flags value, so one negotiated Flags answers every
//     Supports question.
//
// Each side uses the set the PEER ADVERTISED, never its own constant:
// Supports(advertised, bit). Bits a receiver does not know are ignored when
// it computes the usable set (Negotiate). Unknown bits in a frame header are
// a different matter: they reject the frame.

// capsShift places the client_caps / server_caps word in a Flags value.
const capsShift = 16

// Felix-Go capability bits. Their wire value (in client_caps/server_caps)
// is the constant >> 16. They are never valid in a frame header.
const (
	// CapGapNotices: the client understands subscription_gap messages on
	// its event streams. A broker sends them only to clients advertising
	// this bit; others see drops only as offset gaps (with 0x0020) or not
	// at all.
	CapGapNotices Flags = 0x0040 << capsShift
	// CapCache: the peer speaks the cache additions: cache_delete,
	// counter_add / counter_get, watch, and the correlated cache_error
	// reply (message_cache.go). A broker answers a failed cache request
	// with cache_error only to clients advertising this bit; others get
	// the v1 uncorrelated error.
	CapCache Flags = 0x0080 << capsShift
	// CapRoster: the peer speaks the roster messages (roster_join,
	// roster_leave, roster_watch and their replies and events). A broker
	// answers them only on streams whose client advertised it.
	CapRoster Flags = 0x0100 << capsShift
	// CapQueue: the peer speaks the consumer-group queue messages
	// (queue_consume, queue_ack, queue_nack and their replies and events).
	CapQueue Flags = 0x0200 << capsShift
	// CapForwarded marks a stream whose publishes a broker forwards to the
	// shard's owner. A broker receiving a publish on such a stream for a
	// shard it does not own answers not_owner instead of forwarding again,
	// so a publish is forwarded at most once. It is not in
	// KnownCapabilities (an ordinary client must not claim it); brokers
	// advertise it to say they honour it.
	CapForwarded Flags = 0x1000 << capsShift
	// CapQueueShards: the peer speaks multi-shard consumer groups (the
	// shard field of queue_message, queue_ack and queue_nack). A broker
	// refuses queue_consume on a stream of more than one shard to a peer
	// without it: such a client would drop the shard and could never ack.
	CapQueueShards Flags = 0x2000 << capsShift
	// CapHeaders: the peer speaks event headers: FlagHeaders on publishes
	// and event batches, and the "headers" field of queue_message and of
	// group_records' records (eventheaders.go). A broker sends them only to a
	// client that offered this bit, and a client sends FlagHeaders only to
	// a broker that advertised it.
	CapHeaders Flags = 0x0400 << capsShift
	// CapGroupMaxAttempts: the broker honours "max_attempts" on
	// group_poll and queue_consume (a group's bound on deliveries, kept
	// with its state) and reports it in group_info.
	CapGroupMaxAttempts Flags = 0x0800 << capsShift

	// CapOwner is FlagAckOwner offered: the peer decodes owner-naming acks
	// (binary 0x0090, the owner fields of publish_ok / publish_error /
	// error).
	CapOwner = FlagAckOwner
	// CapShard is FlagShard: shard-addressed publishes, and acks that say
	// the shard a batch landed on ("shard" in JSON answers).
	CapShard = FlagShard
)

// KnownCapabilities is every frame flag and Felix-Go capability this
// package understands.
const KnownCapabilities = KnownFlags | CapGapNotices | CapCache | CapRoster | CapQueue | CapQueueShards |
	CapHeaders | CapGroupMaxAttempts

// FrameFlags is the client_flags / server_flags word of f.
func (f Flags) FrameFlags() uint16 { return uint16(f) }

// Caps is the client_caps / server_caps word of f.
func (f Flags) Caps() uint32 { return uint32(f >> capsShift) }

// PeerFlags returns the frame-flag set of a peer that sent clientFlags in
// auth (nil = field absent = OriginalV1Flags).
func PeerFlags(clientFlags *uint16) Flags {
	if clientFlags == nil {
		return OriginalV1Flags
	}
	return Flags(*clientFlags)
}

// PeerSet is PeerFlags with the peer's Felix-Go capability word (nil:
// none) in the high bits.
func PeerSet(flags *uint16, caps *uint32) Flags {
	f := PeerFlags(flags)
	if caps != nil {
		f |= Flags(*caps&0xFFFF) << capsShift
	}
	return f
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

// Features is the published Felix's feature word (client_features /
// server_features): which requests a broker serves and which answers a
// client can decode. A client must never send a featured request to a
// broker that did not advertise the bit.
type Features uint32

// Feature bits this package implements (the published numbering).
const (
	// FeatureConsumerGroup: group_poll, group_ack, group_nack
	// (message_group.go).
	FeatureConsumerGroup Features = 0x8
	// FeatureGroupDeadLetters: group_dead_letters, group_discard,
	// group_redrive.
	FeatureGroupDeadLetters Features = 0x10
	// FeatureStreamShards: stream_shards → stream_shards_view (a stream's
	// width and routing, for clients that hash keys themselves).
	FeatureStreamShards Features = 0x20
	// FeatureIdempotentProducer: producer_init, publish_idempotent, binary
	// 0x0100 publishes, and publish_refused.
	FeatureIdempotentProducer Features = 0x200
	// FeatureErrorCodes: code / retry / detail on error answers
	// (errorcode.go).
	FeatureErrorCodes Features = 0x800
	// FeatureSequenceReused: a re-send of a remembered sequence with other
	// data is refused sequence_reused; without it, it is answered
	// publish_ok and not written, as the published broker does.
	FeatureSequenceReused Features = 0x4000
	// FeatureGroupConsumer: "consumer" and "reclaim" on group_poll.
	FeatureGroupConsumer Features = 0x10_0000
	// FeatureGroupPublisher: offered by a client that reads "publisher"
	// on a group record.
	FeatureGroupPublisher Features = 0x80_0000
	// FeatureGroupAdmin: group_seek, group_describe, group_delete.
	FeatureGroupAdmin Features = 0x100_0000
	// FeatureCacheConditional: cache_put_if, cache_delete_if; offered by
	// a client that reads "version" on cache_value.
	FeatureCacheConditional Features = 0x200_0000
	// FeatureRecordTimestamps: offset_for_time; offered by a client that
	// reads "timestamp_micros" on a group record.
	FeatureRecordTimestamps Features = 0x400_0000
	// FeatureGroupClaimControl: group_extend, group_dead_letter,
	// "delay_ms" and "attempts" on group_nack, "visibility_ms" on
	// group_poll.
	FeatureGroupClaimControl Features = 0x800_0000
	// FeatureExtended marks that client_features_hi / server_features_hi
	// follow; this package sends neither.
	FeatureExtended Features = 0x8000_0000

	// GroupFeatures are the consumer-group features, which a broker
	// advertises only when it has durable storage.
	GroupFeatures = FeatureConsumerGroup | FeatureGroupDeadLetters | FeatureGroupConsumer | FeatureGroupPublisher |
		FeatureGroupAdmin | FeatureGroupClaimControl

	// KnownFeatures is every feature this package implements.
	KnownFeatures = FeatureStreamShards | FeatureIdempotentProducer | FeatureErrorCodes | FeatureSequenceReused |
		GroupFeatures | FeatureCacheConditional | FeatureRecordTimestamps
)

// Has reports whether every bit of bit is set; a zero bit never is.
func (f Features) Has(bit Features) bool { return bit != 0 && f&bit == bit }

// PeerFeatures is the feature word a peer advertised (nil: none).
func PeerFeatures(w *uint32) Features {
	if w == nil {
		return 0
	}
	return Features(*w)
}
