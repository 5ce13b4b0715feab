package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/udp"
	"github.com/felixmq/felix/wire"
)

// stallCheck is how often the watchdog looks at the path. quic-go's probe
// timeouts back off from ~25 ms on loopback, so udp.StallPTOs of them take
// most of a second; checking every 50 ms adds little to that.
const stallCheck = 50 * time.Millisecond

// stallQuietChecks is how many checks in a row must see nothing arrive from
// the broker before probe timeouts count as a stalled path.
const stallQuietChecks = 2

// closeGrace is the least time between closing a stalled session and
// redialling; redialTimeout bounds one redial attempt (a handshake that
// still meets the black hole is retried rather than waited out).
const (
	closeGrace    = 10 * time.Millisecond
	redialTimeout = 2 * time.Second
)

// probeAfter is how long the broker may stay silent before the watchdog
// sends a liveness probe, and then how often it sends one. Not shorter:
// quic-go times its probe timeouts from the last ack-eliciting packet, so
// probes more often than the probe timeout grows keep its count from
// reaching udp.StallPTOs (at 500 ms a black-holed path under -race never
// counted as stalled).
const probeAfter = time.Second

// askQuiet is how long a broker that owes the client an answer may stay
// silent before the watchdog asks the broker's host whether anything still
// listens on its port (watchRefused), and then how often it asks again; at
// least twice the smoothed RTT, so that a long path is not asked about
// answers still on their way. A broker process that died on a live host
// is answered for by its kernel (ICMP port unreachable), and the client
// closes the connection then instead of after SilentPeerTimeout; a lost
// host answers nothing, and only the silence tells.
const askQuiet = 100 * time.Millisecond

// probePayload pads a probe past quic-go's smallest packet that earns a
// stateless reset (protocol.MinStatelessResetSize, 42 bytes).
var probePayload = make([]byte, 48)

// session is one QUIC connection of a Client. Publishers and subscriptions
// stay on the session they were opened on: quic-go can neither move
// streams to another connection nor lower a live connection's packet size,
// so after a stall they end with ErrPathStalled and the caller reopens them
// (a durable subscription resumes by offset).
type session struct {
	c       *Client
	qc      *quic.Conn
	stats   *udp.ConnStats
	mtu     udp.MTUSettings
	router  router
	stalled atomic.Bool // closed by the watchdog because its path stalled
	refused atomic.Bool // closed because nothing listens on the broker's port any more
	// awaiting counts goroutines waiting for an answer of the broker (a
	// reply reader reading for one, readJSON, a reqStream request): only
	// then does its silence make the watchdog ask whether it died.
	awaiting atomic.Int32
	probing  atomic.Bool // a probe is being queued (probe)
}

// probe sends a QUIC DATAGRAM frame the broker ignores. A client waiting
// on application replies leaves quic-go idle: nothing in flight to time
// out, and the 10 s keep-alive PING is too small for a restarted broker to
// answer with a stateless reset. The probe is ack-eliciting (a dead path
// gets probe timeouts, hence a stall) and large enough that a broker
// restarted with the same certificate resets the connection at once. It
// fails harmlessly where the broker did not enable datagrams. quic-go
// queues a datagram it cannot send yet (a full congestion window) and
// blocks the sender once 32 wait, so the probe is sent from a goroutine of
// its own, at most one at a time: the watchdog never waits on it.
func (s *session) probe() {
	if !s.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.probing.Store(false)
		_ = s.qc.SendDatagram(probePayload)
	}()
}

// wrap marks errors of a session the watchdog closed as ErrPathStalled,
// or as ErrConnectionRefused when its broker's process was gone.
func (s *session) wrap(err error) error {
	switch {
	case err == nil:
	case s.stalled.Load():
		return fmt.Errorf("%w: %w", ErrPathStalled, err)
	case s.refused.Load():
		return fmt.Errorf("%w: %w", ErrConnectionRefused, err)
	}
	return err
}

// gone closes the session after the broker's host said that nothing
// listens on its port any more: the process died (its host did not, or it
// would not have answered). Its streams fail as after a silent broker.
func (s *session) gone() {
	s.refused.Store(true)
	s.c.cfg.Logger.Warn("broker gone: port unreachable", "remote", s.c.raddr.String())
	s.qc.CloseWithError(0, "broker gone: port unreachable")
}

// watch is the Client's watchdog: it logs connection statistics every
// ConnStatsInterval, replaces a session whose path stalled, and closes one
// whose broker died (its port refused, or it stayed silent). quic-go has
// no black-hole detection and never lowers a live connection's packet size
// (docs/design.md, "Transport"), so the cure is a new connection. Probe timeouts and silence also come
// from a machine too busy to run either end, which a new connection does
// not cure (and a redial would end the session's streams), so the watchdog
// redials only where a black hole can exist (not on a path that is
// udp.MTUGuaranteed, such as loopback), and it does not count checks that
// its own late wake-up shows the process was starved of CPU.
func (c *Client) watch() {
	t := time.NewTicker(stallCheck)
	defer t.Stop()
	var (
		lastLog time.Time
		watched *session
		look    stallWatch
		stopAsk = func() {} // ends the current watchRefused
	)
	defer func() { stopAsk() }()
	for {
		s := c.session()
		if s != watched {
			stopAsk()
			stopAsk = func() {}
			watched, look = s, stallWatch{heardAt: time.Now()}
		}
		select {
		case <-c.stop:
			return
		case <-s.qc.Context().Done():
			if !s.stalled.Load() {
				return // the broker or the network ended it: nothing to redial
			}
		case now := <-t.C:
			snap := s.stats.Snapshot()
			if iv := c.cfg.ConnStatsInterval; iv > 0 && now.Sub(lastLog) >= iv {
				lastLog = now
				c.logStats(s, snap)
			}
			probe, stalled := look.look(now, c.received(s), udp.Stalled(snap))
			if probe && probeWithInFlight(snap.BytesInFlight, snap.PTOCount) {
				s.probe()
			}
			if look.ask(now, s.awaiting.Load() > 0, snap.SmoothedRTT) {
				stopAsk()
				stopAsk = watchRefused(c.raddr, s.gone)
			}
			if c.cfg.BlackHoleCooldown > 0 && !c.guaranteed && stalled {
				c.redial(s, snap)
			}
			if !c.local && look.silent(now, c.cfg.SilentPeerTimeout, snap.PTOCount) {
				st := s.qc.ConnectionStats()
				c.cfg.Logger.Warn("broker silent: closing the connection", "remote", c.raddr.String(), "silent_for", now.Sub(look.heardAt).Round(time.Millisecond),
					"packets_sent", st.PacketsSent, "packets_received", st.PacketsReceived, "pto_count", snap.PTOCount,
					"bytes_in_flight", snap.BytesInFlight, "packets_dropped", snap.PacketsDropped, "rtt", snap.SmoothedRTT)
				s.qc.CloseWithError(0, "broker silent")
				watched = nil
			}
		}
	}
}

// stallWatch is the watchdog's decision, one look per stallCheck, as a
// pure core: when to probe a silent broker, when the path counts as
// stalled, and when to ask whether the broker's port closed (ask). Probe
// timeouts alone also come from a peer starved of CPU; a black hole also
// silences the peer, whose replies and acks are as large as ours or wait
// on ours, while a busy broker still sends. So a stall is
// probe timeouts (udp.Stalled) with nothing received for stallQuietChecks
// looks in a row. A look that comes late (more than two stallChecks after
// the one before) shows this process was starved of CPU, and a starved
// client cannot judge the path: it counts as hearing from the broker. The
// zero value has heard nothing yet; set heardAt to when the session
// started.
type stallWatch struct {
	lastRecv uint64
	quiet    int // looks in a row in which nothing arrived from the broker
	heardAt  time.Time
	probedAt time.Time
	askedAt  time.Time
	lastLook time.Time
}

// look takes what has arrived from the broker so far and whether probe
// timeouts say the path stalled, and says whether to send a liveness probe
// and whether the session stalled.
func (w *stallWatch) look(now time.Time, received uint64, ptoStalled bool) (probe, stalled bool) {
	starved := !w.lastLook.IsZero() && now.Sub(w.lastLook) > 2*stallCheck
	w.lastLook = now
	if received != w.lastRecv || starved {
		w.lastRecv, w.quiet, w.heardAt = received, 0, now
	} else {
		w.quiet++
	}
	if now.Sub(w.heardAt) >= probeAfter && now.Sub(w.probedAt) >= probeAfter {
		w.probedAt = now
		probe = true
	}
	return probe, ptoStalled && w.quiet >= stallQuietChecks
}

// silentPTOs is how many probe timeouts in a row, besides the silence,
// make a broker count as gone. quic-go backs its probe timeout off from
// the smoothed RTT: on a LAN three take a fifth of a second, while a broker
// that answers, however late (measured: 500 subscribers on two cores, a
// smoothed RTT of 100-300 ms and silences over 2 s), resets the count with
// every ack. Silence alone closed such connections.
const silentPTOs = 3

// probeWithInFlight says whether a due probe is sent with inFlight bytes
// unacknowledged. With something in flight a probe re-arms quic-go's probe
// timer and so delays the probe timeouts that both the black-hole check
// (udp.StallPTOs) and the silence rule (silentPTOs) count; only an ack
// resets their count, so once it reached both a probe delays neither. It
// is still needed then: what is in flight may be a few bytes (a
// subscriber's flow-control update) whose retransmissions are too small
// for a restarted broker to answer with a stateless reset, which the probe
// earns; a loopback broker is never closed for silence, so there it is the
// only way out.
func probeWithInFlight(inFlight int, ptos uint32) bool {
	return inFlight == 0 || ptos >= max(silentPTOs, udp.StallPTOs)
}

// silent reports whether the broker counts as gone: nothing heard for d
// (0: never) and ptos probe timeouts in a row.
func (w *stallWatch) silent(now time.Time, d time.Duration, ptos uint32) bool {
	return d > 0 && now.Sub(w.heardAt) >= d && ptos >= silentPTOs
}

// ask says, after look, whether to ask the broker's host now whether
// anything still listens on its port: while an answer is due (awaiting,
// or the liveness probe's own, once the broker stayed silent askQuiet past
// probeAfter) and the broker has been silent for askQuiet (at least twice
// rtt), once per such interval. An idle client whose broker answers its
// probes never asks.
func (w *stallWatch) ask(now time.Time, awaiting bool, rtt time.Duration) bool {
	d := max(askQuiet, 2*rtt)
	awaiting = awaiting || now.Sub(w.heardAt) >= probeAfter+d
	if !awaiting || now.Sub(w.heardAt) < d || now.Sub(w.askedAt) < d {
		return false
	}
	w.askedAt = now
	return true
}

// received counts what arrived from the broker: quic-go's processed
// packets, plus, on the udp conn, datagrams the socket took in, so that a
// client too busy to process what arrived is not mistaken for a silent path.
func (c *Client) received(s *session) uint64 {
	n := s.qc.ConnectionStats().PacketsReceived
	if uc, ok := c.pc.(*udp.Conn); ok {
		n += uc.Stats().DatagramsIn
	}
	return n
}

func (c *Client) logStats(s *session, snap udp.ConnSnapshot) {
	st := s.qc.ConnectionStats()
	c.cfg.Logger.Info("connection stats", "remote", c.raddr.String(),
		"mtu", snap.MTU, "gso", s.qc.ConnectionState().GSO,
		"rtt", st.SmoothedRTT, "min_rtt", st.MinRTT,
		"packets_sent", st.PacketsSent, "packets_received", st.PacketsReceived,
		"packets_lost", snap.PacketsLost, "congestion_events", snap.CongestionEvents,
		"congestion_window", snap.CongestionWindow, "pto_count", snap.PTOCount)
}

// redial closes the stalled session and dials a new one at the black-hole
// size, retrying until it succeeds or the Client closes.
func (c *Client) redial(old *session, snap udp.ConnSnapshot) {
	now := time.Now()
	c.mu.Lock()
	c.mu.lastStall = now
	c.mu.Unlock()
	mtu := c.redialMTU()
	c.cfg.Logger.Warn("connection path stalled; redialling", "remote", c.raddr.String(),
		"pto_count", snap.PTOCount, "mtu", snap.MTU, "packets_lost", snap.PacketsLost,
		"new_mtu", mtu.InitialPacketSize, "cooldown", c.cfg.BlackHoleCooldown)
	old.stalled.Store(true)
	old.qc.CloseWithError(quic.ApplicationErrorCode(wire.ClosePathStalled), "path stalled")
	// The broker answers this peer at the black-hole size only once it has
	// processed that close; a handshake overtaking it would get full-size
	// packets back and stall again. Give the close a few round trips.
	select {
	case <-c.stop:
		return
	case <-time.After(max(closeGrace, 4*old.stats.Snapshot().SmoothedRTT)):
	}
	backoff := 50 * time.Millisecond
	for {
		s, err := c.dialStoppable(mtu)
		if err == nil {
			c.replaceSession(s)
			return
		}
		c.cfg.Logger.Warn("redial failed", "remote", c.raddr.String(), "err", err, "retry_in", backoff)
		select {
		case <-c.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// dialStoppable dials with a redialTimeout bound that Close cuts short.
func (c *Client) dialStoppable(mtu udp.MTUSettings) (*session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), redialTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return c.dial(ctx, mtu)
}

// redialMTU is the size for a redial: the black-hole size within the
// cooldown of the last stall, the normal policy after it.
func (c *Client) redialMTU() udp.MTUSettings {
	c.mu.Lock()
	last := c.mu.lastStall
	c.mu.Unlock()
	return udp.BlackHoleMTU(time.Now(), last, c.cfg.BlackHoleCooldown, c.normal)
}
