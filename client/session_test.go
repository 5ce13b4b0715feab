package client

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/udp"
)

// look is one look of the watchdog in TestStallWatch.
type look struct {
	at       time.Duration // since the session started
	received uint64
	pto      bool // udp.Stalled
	probe    bool
	stalled  bool
}

// The watchdog redials only when probe timeouts pile up and the broker has
// gone quiet for stallQuietChecks looks in a row: probe timeouts with
// packets still arriving are a peer starved of CPU, not a black hole, and
// looks that come late show this client starved. It probes a broker silent
// for probeAfter, then every probeAfter.
func TestStallWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{name: "traffic keeps it alive", looks: []look{
			{at: 50 * time.Millisecond, received: 1},
			{at: 100 * time.Millisecond, received: 2, pto: true},
			{at: 150 * time.Millisecond, received: 3, pto: true},
			{at: 200 * time.Millisecond, received: 4, pto: true},
		}},
		{name: "probe timeouts while quiet: stalled after two quiet looks", looks: []look{
			{at: 50 * time.Millisecond, received: 5},
			{at: 100 * time.Millisecond, received: 5, pto: true},
			{at: 150 * time.Millisecond, received: 5, pto: true, stalled: true},
			{at: 200 * time.Millisecond, received: 6, pto: true},
		}},
		{name: "quiet without probe timeouts is not a stall", looks: []look{
			{at: 50 * time.Millisecond},
			{at: 100 * time.Millisecond},
			{at: 150 * time.Millisecond},
		}},
		{name: "a silent broker is probed every probeAfter", looks: silentLooks()},
		{name: "late looks are a starved client, not a stall", looks: []look{
			{at: 50 * time.Millisecond, received: 5},
			{at: 250 * time.Millisecond, received: 5, pto: true},
			{at: 450 * time.Millisecond, received: 5, pto: true},
			{at: 650 * time.Millisecond, received: 5, pto: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stallWatch{heardAt: t0}
			for i, l := range tc.looks {
				probe, stalled := w.look(t0.Add(l.at), l.received, l.pto)
				require.Equal(t, l.probe, probe, "look %d: probe", i)
				require.Equal(t, l.stalled, stalled, "look %d: stalled", i)
			}
		})
	}
}

// silentLooks looks every stallCheck at a broker that sends one packet
// just after the second probe: probes at probeAfter and 2×probeAfter, then
// probeAfter after it was heard.
func silentLooks() []look {
	var looks []look
	heard := 2*probeAfter + 50*time.Millisecond
	for at := stallCheck; at <= 3*probeAfter+50*time.Millisecond; at += stallCheck {
		l := look{at: at}
		if at >= heard {
			l.received = 1
		}
		l.probe = at == probeAfter || at == 2*probeAfter || at == heard+probeAfter
		looks = append(looks, l)
	}
	return looks
}

// A broker counts as gone after the silence and three probe timeouts in a
// row, not after the silence alone (a broker answering late resets the
// count with each ack), and never with the timeout off.
func TestSilentBroker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := stallWatch{heardAt: t0}
	require.False(t, w.silent(t0.Add(time.Second), 2*time.Second, silentPTOs))
	require.False(t, w.silent(t0.Add(3*time.Second), 2*time.Second, silentPTOs-1))
	require.True(t, w.silent(t0.Add(3*time.Second), 2*time.Second, silentPTOs))
	require.False(t, w.silent(t0.Add(time.Hour), 0, 10))
}

// A redial within the cooldown of the last stall uses the black-hole size
// without discovery; later ones, and any without a stall, the normal policy.
// A due probe goes out with nothing in flight, and with bytes in flight
// only once the probe timeouts that the black-hole check and the silence
// rule count are reached (a probe re-arms their timer; only an ack resets
// their count).
func TestProbeWithInFlight(t *testing.T) {
	require.True(t, probeWithInFlight(0, 0))
	need := uint32(max(silentPTOs, udp.StallPTOs))
	require.False(t, probeWithInFlight(25, need-1))
	require.True(t, probeWithInFlight(25, need))
}

func TestRedialMTU(t *testing.T) {
	normal := udp.MTUSettings{InitialPacketSize: 1452, DisablePathMTUDiscovery: true}
	hole := udp.MTUSettings{InitialPacketSize: udp.BlackHolePacketSize, DisablePathMTUDiscovery: true}
	for _, tc := range []struct {
		name      string
		lastStall time.Duration // before now; 0: never stalled
		cooldown  time.Duration
		want      udp.MTUSettings
	}{
		{name: "never stalled", cooldown: time.Minute, want: normal},
		{name: "stalled just now", lastStall: time.Millisecond, cooldown: time.Minute, want: hole},
		{name: "stalled before the cooldown", lastStall: 2 * time.Minute, cooldown: time.Minute, want: normal},
		{name: "stall redials off", lastStall: time.Millisecond, cooldown: -1, want: normal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{cfg: Config{BlackHoleCooldown: tc.cooldown}, normal: normal}
			if tc.lastStall > 0 {
				c.mu.lastStall = time.Now().Add(-tc.lastStall)
			}
			require.Equal(t, tc.want, c.redialMTU())
		})
	}
}

// Errors of a session the watchdog closed say ErrPathStalled (the caller
// reopens, resuming by offset) and keep their cause; other sessions' errors
// pass unchanged.
func TestSessionWrapMarksStalledErrors(t *testing.T) {
	s := &session{}
	require.NoError(t, s.wrap(nil))
	require.Same(t, io.EOF, s.wrap(io.EOF))
	s.stalled.Store(true)
	err := s.wrap(io.EOF)
	require.ErrorIs(t, err, ErrPathStalled)
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, s.wrap(nil))
	require.False(t, errors.Is(s.wrap(ErrClosed), io.EOF))
}

// asked is one look of the watchdog in TestStallWatchAsks.
type asked struct {
	at       time.Duration // since the session started
	received uint64
	awaiting bool
	ask      bool
}

// The watchdog asks the broker's host whether anything still listens on
// the broker's port only while an answer is due (a reply, or the liveness
// probe's) and the broker has been silent for askQuiet (at least twice the
// RTT), then once per such interval: an idle client whose broker answers
// its probes never asks, hearing from the broker starts the quiet over,
// and a late look (a starved client) counts as hearing.
func TestStallWatchAsks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		rtt   time.Duration
		looks []asked
	}{
		{name: "an idle client whose broker answers its probes never asks", looks: answeredLooks(3 * time.Second)},
		{name: "an idle client whose probe goes unanswered: askQuiet after it, then every askQuiet", looks: quietLooks(3*time.Second, false,
			func(at time.Duration) bool { return at >= probeAfter+askQuiet && at%askQuiet == 0 })},
		{name: "a silent broker that owes an answer: every askQuiet", looks: quietLooks(time.Second, true,
			func(at time.Duration) bool { return at%askQuiet == 0 })},
		{name: "answers arriving: never", looks: []asked{
			{at: 50 * time.Millisecond, received: 1, awaiting: true},
			{at: 100 * time.Millisecond, received: 2, awaiting: true},
			{at: 150 * time.Millisecond, received: 3, awaiting: true},
			{at: 200 * time.Millisecond, received: 4, awaiting: true},
		}},
		{name: "heard again: the quiet starts over", looks: []asked{
			{at: 50 * time.Millisecond, awaiting: true},
			{at: 100 * time.Millisecond, awaiting: true, ask: true},
			{at: 150 * time.Millisecond, received: 1, awaiting: true},
			{at: 200 * time.Millisecond, received: 1, awaiting: true},
			{at: 250 * time.Millisecond, received: 1, awaiting: true, ask: true},
		}},
		{name: "a late look is a starved client", looks: []asked{
			{at: 50 * time.Millisecond, awaiting: true},
			{at: 300 * time.Millisecond, awaiting: true},
			{at: 350 * time.Millisecond, awaiting: true},
			{at: 400 * time.Millisecond, awaiting: true, ask: true},
		}},
		{name: "a long path: every twice the RTT", rtt: 150 * time.Millisecond, looks: quietLooks(time.Second, true,
			func(at time.Duration) bool { return at%(300*time.Millisecond) == 0 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stallWatch{heardAt: t0}
			for i, l := range tc.looks {
				w.look(t0.Add(l.at), l.received, false)
				require.Equal(t, l.ask, w.ask(t0.Add(l.at), l.awaiting, tc.rtt), "look %d (%v)", i, l.at)
			}
		})
	}
}

// answeredLooks looks every stallCheck until end at an idle client whose
// broker answers each liveness probe by the next look.
func answeredLooks(end time.Duration) []asked {
	var looks []asked
	for at := stallCheck; at <= end; at += stallCheck {
		looks = append(looks, asked{at: at, received: uint64((at - stallCheck) / probeAfter)})
	}
	return looks
}

// quietLooks looks every stallCheck until end at a broker that sends
// nothing; ask says at which looks the watchdog asks (nil: none).
func quietLooks(end time.Duration, awaiting bool, ask func(time.Duration) bool) []asked {
	var looks []asked
	for at := stallCheck; at <= end; at += stallCheck {
		looks = append(looks, asked{at: at, awaiting: awaiting, ask: ask != nil && ask(at)})
	}
	return looks
}
