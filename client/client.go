package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/udp"
	"github.com/felixmq/felix/wire"
)

// Client is a connection to a broker. It owns one QUIC connection at a time
// (a session); when the path stalls it redials and new publishers and
// subscriptions use the new session (see Config.BlackHoleCooldown).
type Client struct {
	cfg    Config
	addr   string // as given to Dial
	raddr  *net.UDPAddr
	pc     net.PacketConn
	tr     *quic.Transport
	normal udp.MTUSettings // the MTU policy for this broker
	// guaranteed: the path carries full-size packets for certain
	// (loopback), so the watchdog never takes silence for a black hole.
	guaranteed bool
	// local: the broker is on this host (loopback), which cannot be lost
	// while this client runs, so its silence never closes the connection:
	// a dead broker's port refuses (ask), a live one is only slow.
	local bool
	stop  chan struct{} // closed by Close
	wg    sync.WaitGroup
	once  sync.Once

	dialMu sync.Mutex // serialises replacing a session the broker closed unauthenticated
	mu     struct {
		sync.Mutex
		cur       *session
		replaced  chan struct{} // closed when cur is replaced
		lastStall time.Time
		redials   uint64
	}
}

// Dial connects to the broker at addr ("host:port") and authenticates a
// first stream, so that a token the broker refuses fails here (ErrAuth)
// rather than at the first publish. A port nothing listens on fails at
// once with ErrConnectionRefused where the host says so.
func Dial(ctx context.Context, addr string, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("client: resolve %s: %w", addr, err)
	}
	pc, err := listen(cfg, raddr)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c := &Client{
		cfg: cfg, addr: addr, raddr: raddr, pc: pc, tr: &quic.Transport{Conn: pc},
		normal:     udp.MTUPolicy(runtime.GOOS, raddr, udp.MTUKnobs{InitialMTU: cfg.InitialMTU}),
		guaranteed: udp.MTUGuaranteed(raddr, udp.MTUKnobs{InitialMTU: cfg.InitialMTU}),
		local:      raddr.IP.IsLoopback(),
		stop:       make(chan struct{}),
	}
	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := watchRefused(raddr, func() { cancel(ErrConnectionRefused) })
	s, err := c.dial(dctx, c.normal)
	stop()
	if err != nil {
		c.tr.Close()
		pc.Close()
		if cause := context.Cause(dctx); errors.Is(cause, ErrConnectionRefused) {
			return nil, fmt.Errorf("client: dial %s: %w", addr, cause)
		}
		return nil, err
	}
	c.mu.cur = s
	c.mu.replaced = make(chan struct{})
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.watch() }()
	ct, err := c.openControl(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	ct.str.CancelRead(0)
	ct.str.Close()
	return c, nil
}

// listen opens the client's UDP socket, on the wildcard address of the
// broker's family.
func listen(cfg Config, raddr *net.UDPAddr) (net.PacketConn, error) {
	laddr := "0.0.0.0:0"
	if raddr.IP.To4() == nil {
		laddr = "[::]:0"
	}
	if cfg.PlainUDP {
		return net.ListenPacket("udp", laddr)
	}
	ucfg := cfg.UDP
	if ucfg.Logger == nil {
		ucfg.Logger = cfg.Logger
	}
	return udp.Listen("udp", laddr, ucfg)
}

// dial opens a session with the given MTU settings and starts its router.
func (c *Client) dial(ctx context.Context, mtu udp.MTUSettings) (*session, error) {
	tlsConf := c.cfg.TLS.Clone()
	tlsConf.NextProtos = []string{ALPN}
	qconf := quicConfig(c.cfg, mtu)
	stats := udp.NewConnStats(mtu.InitialPacketSize)
	qc, err := c.tr.Dial(udp.WithConnStats(ctx, stats), c.raddr, tlsConf, qconf)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", c.raddr, err)
	}
	s := &session{c: c, qc: qc, stats: stats, mtu: mtu}
	s.router.init(s)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); s.router.run() }()
	return s, nil
}

// QUICConfig is the QUIC configuration Dial uses with cfg and the MTU
// settings mtu: bare quic-go measured on the client's terms, as the floor
// under an acked publish, uses it.
func QUICConfig(cfg Config, mtu udp.MTUSettings) *quic.Config {
	return quicConfig(cfg.withDefaults(), mtu)
}

func quicConfig(cfg Config, mtu udp.MTUSettings) *quic.Config {
	qconf := &quic.Config{
		Tracer:                         udp.StatsTracer,
		HandshakeIdleTimeout:           10 * time.Second,
		MaxIdleTimeout:                 handshakeIdle,
		KeepAlivePeriod:                10 * time.Second,
		InitialStreamReceiveWindow:     cfg.StreamReceiveWindow,
		MaxStreamReceiveWindow:         cfg.StreamReceiveWindow,
		InitialConnectionReceiveWindow: cfg.ConnectionReceiveWindow,
		MaxConnectionReceiveWindow:     cfg.ConnectionReceiveWindow,
		MaxIncomingUniStreams:          cfg.MaxSubscriptions,
		EnableDatagrams:                true, // liveness probes (session.probe)
	}
	mtu.Apply(qconf)
	return qconf
}

// session returns the current session.
func (c *Client) session() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.cur
}

// replaceSession makes s the current session and wakes those waiting for
// one (awaitSessionAfter).
func (c *Client) replaceSession(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.redials++
	c.setSessionLocked(s)
}

// setSessionLocked makes s the current session and wakes those waiting
// for one.
func (c *Client) setSessionLocked(s *session) {
	c.mu.cur = s
	close(c.mu.replaced)
	c.mu.replaced = make(chan struct{})
}

// awaitSessionAfter waits until the current session is not old: the
// watchdog's redial has replaced it.
func (c *Client) awaitSessionAfter(ctx context.Context, old *session) error {
	for {
		c.mu.Lock()
		cur, replaced := c.mu.cur, c.mu.replaced
		c.mu.Unlock()
		if cur != old {
			return nil
		}
		select {
		case <-replaced:
		case <-c.stop:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// liveSession is the current session, after replacing one the broker
// closed because none of its streams authenticated in time (a Client
// dialled and left idle past the broker's auth timeout): nothing ran on
// it, so a new connection serves just as well.
func (c *Client) liveSession(ctx context.Context) (*session, error) {
	s := c.session()
	if !closedUnauthenticated(s.qc) {
		return s, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if cur := c.session(); cur != s {
		return cur, nil // replaced meanwhile
	}
	// Counted in wg while it dials, so that Close's Wait covers the
	// goroutines the dial starts.
	c.mu.Lock()
	select {
	case <-c.stop:
		c.mu.Unlock()
		return nil, ErrClosed
	default:
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	ns, err := c.dial(ctx, c.redialMTU())
	if err != nil {
		return nil, err
	}
	// Under mu, so that Close (which closes stop, then the session it
	// reads under mu) either closes ns or is seen here.
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stop:
		ns.qc.CloseWithError(quic.ApplicationErrorCode(wire.CloseNormal), "client closed")
		return nil, ErrClosed
	default:
	}
	c.setSessionLocked(ns)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.watch() }() // the old one's watch returned with it
	return ns, nil
}

// closedUnauthenticated reports whether the broker closed qc with
// wire.CloseUnauthenticated.
func closedUnauthenticated(qc *quic.Conn) bool {
	if qc.Context().Err() == nil {
		return false
	}
	var ae *quic.ApplicationError
	return errors.As(context.Cause(qc.Context()), &ae) && ae.Remote && uint64(ae.ErrorCode) == wire.CloseUnauthenticated
}

// Close closes the connection (and with it every publisher and
// subscription) and waits for the client's goroutines.
func (c *Client) Close() error {
	c.once.Do(func() {
		close(c.stop)
		c.session().qc.CloseWithError(quic.ApplicationErrorCode(wire.CloseNormal), "client closed")
		c.wg.Wait()
		c.tr.Close()
		c.pc.Close()
	})
	return nil
}

// alive reports whether the current connection is open: a connection the
// broker ended (closed, restarted: a stateless reset) is not redialled.
func (c *Client) alive() bool {
	select {
	case <-c.stop:
		return false
	case <-c.session().qc.Context().Done():
		return false
	default:
		return true
	}
}

// Conn exposes the current QUIC connection, e.g. for ConnectionStats. After
// a stall redial it is a different connection.
func (c *Client) Conn() *quic.Conn { return c.session().qc }

// Redials counts the connections this Client replaced after a stall.
func (c *Client) Redials() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.redials
}

// control is an authenticated client-opened bidirectional stream.
type control struct {
	sess     *session
	str      *quic.Stream
	fr       *frameio.Reader
	flags    wire.Flags    // negotiated: what both ends support
	features wire.Features // negotiated published features
}

// openControl opens a stream on the current session and authenticates it.
// The broker answers auth_ok with its capabilities (the client then uses
// the intersection), or plain ok for a broker that predates capabilities
// (original v1 flags).
func (c *Client) openControl(ctx context.Context) (*control, error) {
	sess, err := c.liveSession(ctx)
	if err != nil {
		return nil, err
	}
	str, err := sess.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, sess.wrap(fmt.Errorf("client: open stream: %w", err))
	}
	flags, caps, features := c.cfg.Flags.FrameFlags(), c.cfg.Flags.Caps(), uint32(c.cfg.Features)
	auth := wire.AppendJSONFrame(nil, &wire.Auth{TenantID: c.cfg.Tenant, Token: c.cfg.token(),
		ClientFlags: &flags, ClientFeatures: &features, ClientCaps: &caps})
	if _, err := str.Write(auth); err != nil {
		return nil, sess.wrap(fmt.Errorf("client: write auth: %w", err))
	}
	ct := &control{sess: sess, str: str, fr: frameio.NewReader(str, c.cfg.MaxFrameBytes)}
	m, err := ct.readJSON(ctx)
	if err != nil {
		str.CancelRead(0)
		str.CancelWrite(0)
		return nil, err
	}
	switch m := m.(type) {
	case *wire.AuthOK:
		ct.flags = wire.Negotiate(c.cfg.Flags, wire.PeerSet(&m.ServerFlags, m.ServerCaps))
		ct.features = c.cfg.Features & wire.PeerFeatures(m.ServerFeatures)
	case *wire.OK:
		ct.flags = wire.Negotiate(c.cfg.Flags, wire.OriginalV1Flags)
	case *wire.ErrorMessage:
		return nil, fmt.Errorf("%w: %s", ErrAuth, m.Message)
	default:
		return nil, fmt.Errorf("%w: %s in reply to auth", ErrProtocol, m.Type())
	}
	return ct, nil
}

// readJSON reads one JSON frame, giving up when ctx ends.
func (ct *control) readJSON(ctx context.Context) (wire.Message, error) {
	stop := context.AfterFunc(ctx, func() { ct.str.SetReadDeadline(time.Now()) })
	defer stop()
	ct.sess.awaiting.Add(1)
	defer ct.sess.awaiting.Add(-1)
	h, payload, err := ct.fr.Next()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ct.sess.wrap(fmt.Errorf("client: read reply: %w", err))
	}
	if h.Flags != 0 {
		return nil, fmt.Errorf("%w: binary frame %s where a JSON reply was due", ErrProtocol, h.Flags)
	}
	return wire.DecodeJSON(payload)
}
