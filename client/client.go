package client

import (
	"context"
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

// Client is one QUIC connection to a broker.
type Client struct {
	cfg    Config
	pc     net.PacketConn
	tr     *quic.Transport
	qc     *quic.Conn
	router router
	wg     sync.WaitGroup
	once   sync.Once
}

// Dial connects to the broker at addr ("host:port").
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
	tlsConf := cfg.TLS.Clone()
	tlsConf.NextProtos = []string{ALPN}
	tr := &quic.Transport{Conn: pc}
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
	}
	mtu := udp.MTUPolicy(runtime.GOOS, raddr, udp.MTUKnobs{InitialMTU: cfg.InitialMTU})
	mtu.Apply(qconf)
	qc, err := tr.Dial(udp.WithConnStats(ctx, udp.NewConnStats(mtu.InitialPacketSize)), raddr, tlsConf, qconf)
	if err != nil {
		tr.Close()
		pc.Close()
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	c := &Client{cfg: cfg, pc: pc, tr: tr, qc: qc}
	c.router.init(c)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.router.run() }()
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

// Close closes the connection (and with it every publisher and
// subscription) and waits for the client's goroutines.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.qc.CloseWithError(0, "client closed")
		c.wg.Wait()
		c.tr.Close()
		c.pc.Close()
	})
	return nil
}

// Conn exposes the QUIC connection, e.g. for ConnectionStats.
func (c *Client) Conn() *quic.Conn { return c.qc }

// control is an authenticated client-opened bidirectional stream.
type control struct {
	str   *quic.Stream
	fr    *frameio.Reader
	flags wire.Flags // negotiated: what both ends support
}

// openControl opens a stream and authenticates it. The broker answers
// auth_ok with its capabilities (the client then uses the intersection), or
// plain ok for a broker that predates capabilities (original v1 flags).
func (c *Client) openControl(ctx context.Context) (*control, error) {
	str, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: open stream: %w", err)
	}
	flags := uint16(c.cfg.Flags)
	auth := wire.AppendJSONFrame(nil, &wire.Auth{TenantID: c.cfg.Tenant, Token: c.cfg.Token, ClientFlags: &flags})
	if _, err := str.Write(auth); err != nil {
		return nil, fmt.Errorf("client: write auth: %w", err)
	}
	ct := &control{str: str, fr: frameio.NewReader(str, c.cfg.MaxFrameBytes)}
	m, err := ct.readJSON(ctx)
	if err != nil {
		str.CancelRead(0)
		str.CancelWrite(0)
		return nil, err
	}
	switch m := m.(type) {
	case *wire.AuthOK:
		ct.flags = wire.Negotiate(c.cfg.Flags, wire.Flags(m.ServerFlags))
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
	h, payload, err := ct.fr.Next()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("client: read reply: %w", err)
	}
	if h.Flags != 0 {
		return nil, fmt.Errorf("%w: binary frame %s where a JSON reply was due", ErrProtocol, h.Flags)
	}
	return wire.DecodeJSON(payload)
}
