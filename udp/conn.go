package udp

import (
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/linux"
)

// Conn is the UDP socket quic-go runs on.
//
// Design. quic-go (v0.65) takes its fast path only for a conn implementing
// all of quic.OOBCapablePacketConn, and reads through our code only if the
// conn also has ReadBatch; otherwise it recvmmsg's the fd itself. So Conn
// delegates every OOBCapablePacketConn method to the *net.UDPConn it owns —
// SyscallConn returns that socket's RawConn, because quic-go runs its own
// setsockopts through it (DF, IP_RECVTOS, PKTINFO, the UDP_SEGMENT probe) —
// and adds ReadBatch, which is where batching and GRO splitting happen.
// Sends stay entirely quic-go's: WriteMsgUDP is a synchronous sendmsg that
// passes UDP_SEGMENT and ECN control messages through and returns errors as
// *os.SyscallError inside *net.OpError, so quic-go's EIO → no-GSO and
// EMSGSIZE handling still fire.
//
// Invariants of ReadBatch: it copies into ms[i].Buffers[0] and never
// replaces the slice (quic-go keeps its own reference); it sets N, NN, Addr
// (*net.UDPAddr, or quic-go's send path panics) and Flags; it returns n >= 1
// or an error, never (0, nil), which would make quic-go replay stale slots;
// a passed deadline gives a net.Error with Timeout and Temporary true,
// Close gives net.ErrClosed (not temporary: quic-go then shuts the
// Transport down).
//
// Three read modes, fixed at New:
//   - direct (GRO off, inline): recvmmsg straight into quic-go's buffers;
//   - split (GRO on, inline): recvmmsg into our 64 KiB buffers, then one
//     segment per quic-go message; leftovers wait for the next call;
//   - handoff (Config.Reader set): a pinned reader does the recvmmsg and
//     passes whole batches through a bounded handoff; ReadBatch splits.
//
// Rejected: an asynchronous send queue (quic-go reuses the buffer as soon
// as WriteMsgUDP returns and relies on its errors), and handing GRO
// aggregates through unsplit (quic-go's 1452-byte buffers truncate them and
// a short-header packet runs to the end of the datagram).
type Conn struct {
	uc    *net.UDPConn
	raw   linux.RawConn
	laddr *net.UDPAddr
	cfg   Config
	recv  receiver
	gro   bool
	gso   bool
	rcvB  int
	sndB  int
	st    counters

	// cur is the split-mode batch; only ReadBatch's goroutine touches it.
	cur *batch
	// handoff is the handoff-mode state; nil otherwise.
	handoff *handoff

	closeOnce sync.Once
	closing   chan struct{}
	closeErr  error
}

var bufferWarning sync.Once

// Listen opens a UDP socket on addr ("udp", "udp4" or "udp6") and wraps it.
func Listen(network, addr string, cfg Config) (*Conn, error) {
	ua, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, fmt.Errorf("udp: resolve %s: %w", addr, err)
	}
	uc, err := net.ListenUDP(network, ua)
	if err != nil {
		return nil, fmt.Errorf("udp: %w", err)
	}
	c, err := New(uc, cfg)
	if err != nil {
		uc.Close()
		return nil, err
	}
	return c, nil
}

// New wraps uc, which it owns from then on (Close closes it). It sizes the
// socket buffers, turns GRO on unless disabled, and with Config.Reader
// starts the pinned reader.
func New(uc *net.UDPConn, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("udp: %w", err)
	}
	laddr, _ := uc.LocalAddr().(*net.UDPAddr)
	c := &Conn{uc: uc, raw: raw, laddr: laddr, cfg: cfg, recv: newReceiver(uc), closing: make(chan struct{})}
	c.setupBuffers()
	if !cfg.DisableGRO {
		ok, err := enableGRO(raw)
		if !ok {
			cfg.Logger.Debug("udp: GRO unavailable, reading packet by packet", "err", err)
		}
		c.gro = ok
	}
	c.gso = !cfg.DisableGSO && gsoCapable(raw)
	bufSize := plainBufferSize
	if c.gro {
		bufSize = groBufferSize
	}
	switch {
	case cfg.Reader != nil:
		if err := c.startReader(bufSize); err != nil {
			return nil, err
		}
	case c.gro:
		c.cur = newBatch(cfg.BatchSize, bufSize)
	}
	return c, nil
}

func (c *Conn) setupBuffers() {
	want := c.cfg.SocketBufferBytes
	if want < 0 {
		return
	}
	_ = c.uc.SetReadBuffer(want)
	_ = c.uc.SetWriteBuffer(want)
	rcv, snd, clamped, err := sizeBuffers(c.raw, want)
	c.rcvB, c.sndB = rcv, snd
	if err == nil && clamped {
		bufferWarning.Do(func() {
			c.cfg.Logger.Warn("udp: kernel clamped the socket buffers; expect drops under load. "+
				"Raise net.core.rmem_max and net.core.wmem_max, or run with CAP_NET_ADMIN",
				"wanted", want, "recv", rcv, "send", snd)
		})
	}
}

// Stats returns the counters. Safe for concurrent use.
func (c *Conn) Stats() Stats {
	s := c.st.snapshot()
	s.GRO, s.GSO = c.gro, c.gso
	s.RecvBufferBytes, s.SendBufferBytes = c.rcvB, c.sndB
	return s
}

// ReadBatch reads packets into ms, at least one, splitting GRO aggregates.
// flags is ignored (quic-go passes 0). It must be called from one goroutine
// at a time — quic-go's read loop.
func (c *Conn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	if len(ms) == 0 {
		return 0, errEmptyBatch
	}
	switch {
	case c.handoff != nil:
		return c.readHandoff(ms)
	case c.cur != nil:
		return c.readSplit(ms)
	default:
		return c.readDirect(ms)
	}
}

func (c *Conn) readDirect(ms []ipv4.Message) (int, error) {
	n, err := c.recv.read(ms)
	if err != nil {
		return 0, c.readFailed(err)
	}
	c.st.recvCalls.Add(1)
	c.st.datagramsIn.Add(uint64(n))
	c.st.packetsIn.Add(uint64(n))
	for i := range n {
		if ms[i].Flags&msgTrunc != 0 {
			c.st.truncated.Add(1)
		}
	}
	return n, nil
}

func (c *Conn) readSplit(ms []ipv4.Message) (int, error) {
	for c.cur.empty() {
		n, err := c.recv.read(c.cur.msgs)
		if err != nil {
			return 0, c.readFailed(err)
		}
		c.cur.load(n, &c.st)
	}
	return c.cur.deliver(ms, &c.st), nil
}

func (c *Conn) readFailed(err error) error {
	select {
	case <-c.closing:
		return c.closedError()
	default:
	}
	if !isTimeout(err) {
		c.st.readErrors.Add(1)
	}
	return err
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// ReadFrom reads one packet through the same path as ReadBatch (so it sees
// GRO segments, counters and the pinned handoff). quic-go does not call it.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, _, _, addr, err := c.ReadMsgUDP(b, nil)
	if err != nil {
		return 0, nil, err
	}
	return n, addr, nil
}

// ReadMsgUDP reads one packet and its (carried) control messages through
// the same path as ReadBatch. quic-go does not call it when ReadBatch
// exists; it is here to complete quic.OOBCapablePacketConn.
func (c *Conn) ReadMsgUDP(b, oob []byte) (n, oobn, flags int, addr *net.UDPAddr, err error) {
	ms := []ipv4.Message{{Buffers: [][]byte{b}, OOB: oob}}
	if _, err := c.ReadBatch(ms, 0); err != nil {
		return 0, 0, 0, nil, err
	}
	addr, _ = ms[0].Addr.(*net.UDPAddr)
	return ms[0].N, ms[0].NN, ms[0].Flags, addr, nil
}

// WriteMsgUDP is one synchronous sendmsg(2) with quic-go's control messages
// (UDP_SEGMENT, IP_TOS / IPV6_TCLASS, PKTINFO) passed through unchanged;
// errors are *os.SyscallError inside *net.OpError, as from *net.UDPConn.
// Safe for concurrent use: each quic-go connection has its own writer.
//
// With Config.DisableGSO a write that still carries UDP_SEGMENT (quic-go was
// not told; see the package doc) is segmented here: one sendmsg per
// segment, same control messages minus UDP_SEGMENT, stopping at the first
// error. No GSO reaches the kernel.
func (c *Conn) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (n, oobn int, err error) {
	seg := gsoSegment(oob)
	if seg > 0 && c.cfg.DisableGSO {
		return c.writeSegmented(b, oob, seg, addr)
	}
	n, oobn, err = c.uc.WriteMsgUDP(b, oob, addr)
	c.st.sent(len(b), seg, err)
	return n, oobn, err
}

func (c *Conn) writeSegmented(b, oob []byte, seg int, addr *net.UDPAddr) (n, oobn int, err error) {
	c.st.gsoSplit.Add(1)
	var buf [quicOOBSize]byte
	rest := stripSegment(buf[:0], oob)
	for off := 0; off < len(b); off += seg {
		end := min(off+seg, len(b))
		m, _, err := c.uc.WriteMsgUDP(b[off:end], rest, addr)
		c.st.sent(end-off, 0, err)
		if err != nil {
			return n, 0, err
		}
		n += m
	}
	return n, len(oob), nil
}

// WriteTo sends one datagram.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.uc.WriteTo(b, addr)
	c.st.sent(len(b), 0, err)
	return n, err
}

// SyscallConn returns the socket's own RawConn: quic-go's setsockopt and
// getsockopt calls must reach the real fd.
func (c *Conn) SyscallConn() (linux.RawConn, error) { return c.raw, nil }

// LocalAddr is the socket's *net.UDPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.uc.LocalAddr() }

// SetReadBuffer sets SO_RCVBUF.
func (c *Conn) SetReadBuffer(bytes int) error { return c.uc.SetReadBuffer(bytes) }

// SetWriteBuffer sets SO_SNDBUF.
func (c *Conn) SetWriteBuffer(bytes int) error { return c.uc.SetWriteBuffer(bytes) }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.uc.SetWriteDeadline(t)
}

// SetReadDeadline interrupts a ReadBatch blocked past t (quic-go's
// Transport.Close uses it to stop its read loop on a conn it did not
// create). In handoff mode the deadline applies to waiting on the handoff;
// the pinned reader itself runs without one.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.handoff != nil {
		c.handoff.setDeadline(t)
		return nil
	}
	return c.uc.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.uc.SetWriteDeadline(t) }

// Close closes the socket, which unblocks any read, and waits for the
// pinned reader if there is one. Idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.closeErr = c.uc.Close()
		if c.handoff != nil {
			<-c.handoff.done
		}
	})
	return c.closeErr
}
