// Package impair is a UDP relay that damages traffic on purpose, for tests
// and load runs that need a bad network (this kernel has network
// namespaces and veth but no netem). Each client address gets its own
// upstream socket, so the target sees one peer per client, as through a
// NAT.
//
// What it does to each datagram is set per direction (Up: client to
// target, Down: back) with an Impairment, and can change while it runs:
// random and bursty (Gilbert-Elliott) loss, delay with jitter, reordering,
// duplication, a size cap (a simulated path MTU: larger datagrams vanish,
// as in an MTU black hole) and a black hole for a period.
package impair

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/internal/linux"
)

// Direction selects which way an Impairment applies.
type Direction uint8

const (
	Up   Direction = 1 << iota // client to target
	Down                       // target to client
	Both = Up | Down
)

// Impairment is what happens to the datagrams of one direction. The zero
// value relays everything unchanged.
type Impairment struct {
	// Loss drops each datagram with this probability.
	Loss float64
	// Burst is Gilbert-Elliott loss on top of Loss: in the good state a
	// datagram moves the chain to bad with probability EnterBad; in the bad
	// state it is lost with probability LossInBad and the chain returns to
	// good with probability ExitBad.
	Burst struct{ EnterBad, ExitBad, LossInBad float64 }
	// Delay holds every datagram this long, plus a uniform random extra in
	// [0, Jitter); jitter reorders datagrams whose due times cross.
	Delay, Jitter time.Duration
	// Reorder holds a datagram back by ReorderBy (default 5 ms) with this
	// probability, so later ones overtake it.
	Reorder   float64
	ReorderBy time.Duration
	// Duplicate sends a datagram twice with this probability.
	Duplicate float64
	// MaxDatagram drops datagrams larger than this many bytes; 0: no cap.
	MaxDatagram int
}

// Stats counts datagrams, both directions together.
type Stats struct {
	Relayed, Duplicated, Delayed, Reordered                  uint64
	DroppedLoss, DroppedBurst, DroppedSize, DroppedBlackHole uint64
}

// Dropped is every datagram the proxy dropped, for any reason.
func (s Stats) Dropped() uint64 {
	return s.DroppedLoss + s.DroppedBurst + s.DroppedSize + s.DroppedBlackHole
}

// Proxy relays datagrams between clients and one target.
type Proxy struct {
	front  *net.UDPConn
	target *net.UDPAddr
	backIP net.IP // source address of the upstream sockets

	up, down path

	mu        sync.Mutex
	backs     map[string]*net.UDPConn // client address → upstream socket
	closed    bool
	blackHole time.Time // drop everything until then
	wg        sync.WaitGroup
	closeOnce sync.Once
	done      chan struct{}

	// Dropped counts every dropped datagram (kept for simple callers).
	Dropped atomic.Uint64
}

// maxDatagram is the largest datagram the relay reads (UDP's limit).
const maxDatagram = 64 << 10

// socketBuffer is the receive buffer asked for on every relay socket, so a
// burst is not lost to the kernel before the relay decides its fate (the
// kernel caps it at net.core.rmem_max).
const socketBuffer = 4 << 20

// Option configures New.
type Option func(*Proxy) error

// ListenAddr makes the proxy listen on addr ("ip:port") instead of
// 127.0.0.1 on a free port, e.g. a veth address in a test's namespace.
func ListenAddr(addr string) Option {
	return func(p *Proxy) error {
		a, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		p.front, err = net.ListenUDP("udp", a)
		return err
	}
}

// New relays from a listening socket to target.
func New(target string, opts ...Option) (*Proxy, error) {
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: taddr, backs: map[string]*net.UDPConn{}, done: make(chan struct{})}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	if p.front == nil {
		if p.front, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return nil, err
		}
	}
	growBuffer(p.front)
	p.backIP = net.IPv4(127, 0, 0, 1)
	if !taddr.IP.IsLoopback() {
		p.backIP = nil // any: the kernel picks the route's source
	}
	p.up.init(p)
	p.down.init(p)
	p.wg.Add(3)
	go func() { defer p.wg.Done(); p.forward() }()
	go func() { defer p.wg.Done(); p.up.deliver() }()
	go func() { defer p.wg.Done(); p.down.deliver() }()
	return p, nil
}

// Addr is where clients send.
func (p *Proxy) Addr() string { return p.front.LocalAddr().String() }

// Set replaces the impairment of the given directions.
func (p *Proxy) Set(d Direction, imp Impairment) {
	if d&Up != 0 {
		p.up.set(imp)
	}
	if d&Down != 0 {
		p.down.set(imp)
	}
}

// SetMaxDatagram caps datagram size in both directions, keeping the rest
// of each direction's impairment; 0 removes the cap.
func (p *Proxy) SetMaxDatagram(n int) {
	for _, pa := range []*path{&p.up, &p.down} {
		imp := pa.get()
		imp.MaxDatagram = n
		pa.set(imp)
	}
}

// SetBlackHole drops everything while on.
func (p *Proxy) SetBlackHole(on bool) {
	until := time.Time{}
	if on {
		until = time.Now().Add(100 * 365 * 24 * time.Hour)
	}
	p.mu.Lock()
	p.blackHole = until
	p.mu.Unlock()
}

// BlackHoleFor drops everything for d from now.
func (p *Proxy) BlackHoleFor(d time.Duration) {
	p.mu.Lock()
	p.blackHole = time.Now().Add(d)
	p.mu.Unlock()
}

func (p *Proxy) blackHoled(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return now.Before(p.blackHole)
}

// Stats sums both directions.
func (p *Proxy) Stats() Stats {
	a, b := p.up.stats(), p.down.stats()
	return Stats{
		Relayed: a.Relayed + b.Relayed, Duplicated: a.Duplicated + b.Duplicated,
		Delayed: a.Delayed + b.Delayed, Reordered: a.Reordered + b.Reordered,
		DroppedLoss: a.DroppedLoss + b.DroppedLoss, DroppedBurst: a.DroppedBurst + b.DroppedBurst,
		DroppedSize: a.DroppedSize + b.DroppedSize, DroppedBlackHole: a.DroppedBlackHole + b.DroppedBlackHole,
	}
}

// forward reads from clients and passes each datagram up.
func (p *Proxy) forward() {
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := p.front.ReadFromUDP(buf)
		if err != nil {
			return
		}
		back, err := p.back(from)
		if err != nil {
			return
		}
		p.up.submit(buf[:n], func(b []byte) { back.WriteToUDP(b, p.target) })
	}
}

// back returns the upstream socket of a client, starting its return path.
func (p *Proxy) back(client *net.UDPAddr) (*net.UDPConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("impair: closed")
	}
	key := client.String()
	if b, ok := p.backs[key]; ok {
		return b, nil
	}
	b, err := net.ListenUDP("udp", &net.UDPAddr{IP: p.backIP})
	if err != nil {
		return nil, err
	}
	growBuffer(b)
	p.backs[key] = b
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.backward(b, client) }()
	return b, nil
}

// backward reads the target's replies to one client and passes them down.
func (p *Proxy) backward(b *net.UDPConn, client *net.UDPAddr) {
	buf := make([]byte, maxDatagram)
	for {
		n, _, err := b.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p.down.submit(buf[:n], func(d []byte) { p.front.WriteToUDP(d, client) })
	}
}

// Close stops the relay and waits for its goroutines.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		for _, b := range p.backs {
			b.Close()
		}
		p.mu.Unlock()
		p.front.Close()
		close(p.done)
		p.wg.Wait()
	})
	return nil
}

// growBuffer asks for socketBuffer, past net.core.rmem_max where allowed
// (root); failing that, whatever SetReadBuffer gets.
func growBuffer(c *net.UDPConn) {
	if rc, err := c.SyscallConn(); err == nil {
		var ferr error
		rc.Control(func(fd uintptr) { ferr = linux.SetSocketBuffer(fd, false, socketBuffer, true) })
		if ferr == nil {
			return
		}
	}
	c.SetReadBuffer(socketBuffer)
}

// rng is math/rand/v2's global source: safe for concurrent use.
var rng = rand.Float64
