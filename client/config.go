package client

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/felixmq/felix/udp"
	"github.com/felixmq/felix/wire"
)

// ALPN is Felix's TLS application protocol (the broker's is the same).
const ALPN = "felix"

// DefaultFlags are the frame flags and capabilities a client offers by
// default (Config.Flags).
const DefaultFlags = wire.KnownCapabilities &^ (wire.FlagEventTimestamps | wire.FlagEventPublisher)

// Config configures a Client. Zero values mean the documented defaults.
type Config struct {
	// Tenant and Token go into the auth frame of every stream.
	Tenant string
	Token  string
	// TokenFunc, if set, is asked for the token each time a stream
	// authenticates, instead of Token: a credential renewed while the
	// client lives (a broker's node credential, a refreshed user token).
	// Streams already open keep the token they authenticated with.
	TokenFunc func() string
	// TLS is required: it says how to trust the broker (RootCAs, a pinned
	// fingerprint check, ...). NextProtos is set to ALPN.
	TLS *tls.Config
	// Flags are the frame flags and capabilities this client offers; 0
	// means DefaultFlags: all it knows but the per-event append times and
	// publishers (wire.FlagEventTimestamps, wire.FlagEventPublisher), for
	// which the broker copies every batch it sends. Add them to read
	// Event.Time and Event.Publisher.
	Flags wire.Flags
	// Features are the published feature bits this client offers
	// (idempotent producers, typed errors, sequence_reused,
	// stream_shards); 0 means all it knows.
	Features wire.Features
	// MaxFrameBytes caps frames read from the broker; 0 means 16 MiB.
	MaxFrameBytes uint32
	// QUIC receive windows: 0 means 16 MiB per stream, 64 MiB per connection.
	StreamReceiveWindow     uint64
	ConnectionReceiveWindow uint64
	// MaxSubscriptions bounds concurrent event streams the broker may open;
	// 0 means 4096.
	MaxSubscriptions int64
	// SubscriptionBuffer is how many frames a roster watch or a queue
	// consumer reads ahead of its caller; 0 means 64. When full, the
	// reader stops reading and QUIC flow control pushes back on the broker
	// (the broker's queue, not the client, decides what to drop, so every
	// drop is reported). A Subscription reads on Next's goroutine, and
	// only QUIC flow control bounds what waits for it.
	SubscriptionBuffer int
	// UDP configures the client's packet conn (batched receive with GRO,
	// GSO sends; see package udp). PlainUDP uses a stock *net.UDPConn
	// instead, for comparison and as an escape hatch.
	UDP      udp.Config
	PlainUDP bool
	// InitialMTU overrides the MTU policy (udp.MTUPolicy): 0 means 1452
	// without discovery to a loopback broker, 1280 with discovery otherwise.
	InitialMTU int
	// BlackHoleCooldown is FELIX_MTU_BLACK_HOLE_COOLDOWN_MS: a connection
	// whose path stalls (udp.Stalled: StallPTOs probe timeouts in a row) is
	// closed and redialled at 1200 bytes with path MTU discovery off, and
	// every redial within this long of the last stall uses that size too;
	// later redials use the normal policy again. 0 means
	// udp.DefaultBlackHoleCooldown; negative turns stall redials off.
	BlackHoleCooldown time.Duration
	// SilentPeerTimeout closes a connection whose broker has sent nothing
	// for this long although the client probed it every second, and whose
	// last three probe timeouts went unanswered: the broker's host was
	// lost, the network between is cut, or the broker process died. Its
	// streams then fail (publishers and subscriptions resume elsewhere, or
	// on a new connection) instead of waiting for QUIC's 30 s idle
	// timeout. 0 means 5 s; negative leaves it to the idle timeout. A
	// client starved of CPU does not count as unheard, and a broker that
	// answers late (probe timeouts grow with the round trip) is not gone.
	//
	// A broker process that died (kill -9, a crash) on a host that still
	// runs is noticed sooner, whatever this says: while the client waits
	// for an answer and the broker has been silent for 100 ms (at least
	// twice the RTT), it asks the host, with an empty datagram from a
	// socket of its own every such interval, whether anything still
	// listens on the broker's port. The host's ICMP port unreachable
	// closes the connection at once, and its streams' errors wrap
	// ErrConnectionRefused. A live broker ignores the datagram, and an
	// idle client sends none unless its liveness probe goes unanswered.
	// Only where ICMP is filtered, or a lost host cannot answer, does it
	// take this timeout; a broker on loopback (this host, which cannot be
	// lost while the client runs) is never closed for its silence.
	SilentPeerTimeout time.Duration
	// ConnStatsInterval is FELIX_CONN_STATS_MS: log the connection's QUIC
	// statistics and MTU at this interval (Info level). 0 is off.
	ConnStatsInterval time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Flags == 0 {
		c.Flags = DefaultFlags
	}
	if c.Features == 0 {
		c.Features = wire.KnownFeatures
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = wire.DefaultMaxFrameBytes
	}
	if c.StreamReceiveWindow == 0 {
		c.StreamReceiveWindow = 16 << 20
	}
	if c.ConnectionReceiveWindow == 0 {
		c.ConnectionReceiveWindow = 64 << 20
	}
	if c.MaxSubscriptions == 0 {
		c.MaxSubscriptions = 4096
	}
	if c.SubscriptionBuffer == 0 {
		c.SubscriptionBuffer = 64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.SilentPeerTimeout == 0 {
		c.SilentPeerTimeout = 5 * time.Second
	}
	if c.BlackHoleCooldown == 0 {
		c.BlackHoleCooldown = udp.DefaultBlackHoleCooldown
	}
	return c
}

func (c Config) validate() error {
	if c.TLS == nil {
		return fmt.Errorf("%w: TLS is required (RootCAs or a pinned fingerprint)", ErrInvalidConfig)
	}
	if c.Tenant == "" {
		return fmt.Errorf("%w: Tenant is empty", ErrInvalidConfig)
	}
	if c.ConnStatsInterval < 0 {
		return fmt.Errorf("%w: ConnStatsInterval %v is negative", ErrInvalidConfig, c.ConnStatsInterval)
	}
	return nil
}

const handshakeIdle = 30 * time.Second

// token is the token for the next auth frame.
func (c *Config) token() string {
	if c.TokenFunc != nil {
		return c.TokenFunc()
	}
	return c.Token
}
