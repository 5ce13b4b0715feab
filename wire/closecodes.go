package wire

// QUIC application error codes Felix closes connections with (the
// CONNECTION_CLOSE frame's error code; QUIC leaves their meaning to the
// application). They are not part of wire v1's frames, so the published
// Felix neither sends nor expects them.
const (
	// CloseNormal: the peer is done.
	CloseNormal uint64 = 0x0
	// CloseShutdown: the broker is shutting down or draining.
	CloseShutdown uint64 = 0x1
	// CloseUnauthenticated: no stream of the connection authenticated
	// within the broker's auth timeout, or the broker closed the
	// unauthenticated connection to admit another at its connection
	// limit. Dial again and authenticate at once.
	CloseUnauthenticated uint64 = 0x2
	// ClosePathStalled: the client saw its path stall (probe timeouts in a
	// row, an MTU black hole) and is redialling at the black-hole size; the
	// broker answers that peer's next connections at the same size for the
	// black-hole cooldown.
	ClosePathStalled uint64 = 0x10
)

// StreamSlowConsumer is the RESET_STREAM code that ends a subscriber's event
// stream when the broker cut it as a slow consumer: its queue, under the
// block policy, held up publishers longer than the broker allows. Like the
// connection codes it is not part of wire v1's frames.
const StreamSlowConsumer uint64 = 0x14
