// Package impair is a UDP relay that damages traffic on purpose, for tests
// and load runs that need a bad network on loopback (this kernel has no
// netem). Each client address gets its own upstream socket, so the target
// sees one peer per client, as through a NAT.
//
// Impairments are set while it runs: a size cap (a simulated path MTU:
// larger datagrams vanish, as in an MTU black hole) and a full black hole.
// The reliability issue extends it with loss, delay, reordering and
// duplication.
package impair

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy relays datagrams between clients and one target.
type Proxy struct {
	front  *net.UDPConn
	target *net.UDPAddr

	maxSize   atomic.Int64 // 0: no cap
	blackHole atomic.Bool

	// Counters, both directions.
	Relayed atomic.Uint64
	Dropped atomic.Uint64

	mu      sync.Mutex
	backs   map[string]*net.UDPConn // client address → upstream socket
	closed  bool
	wg      sync.WaitGroup
	closeMu sync.Once
}

// maxDatagram is the largest datagram the relay reads (UDP's limit).
const maxDatagram = 64 << 10

// New listens on 127.0.0.1 (any free port) and relays to target.
func New(target string) (*Proxy, error) {
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	p := &Proxy{front: front, target: taddr, backs: map[string]*net.UDPConn{}}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.forward() }()
	return p, nil
}

// Addr is where clients send.
func (p *Proxy) Addr() string { return p.front.LocalAddr().String() }

// SetMaxDatagram drops every datagram larger than n bytes in both
// directions; 0 removes the cap.
func (p *Proxy) SetMaxDatagram(n int) { p.maxSize.Store(int64(n)) }

// SetBlackHole drops everything while on.
func (p *Proxy) SetBlackHole(on bool) { p.blackHole.Store(on) }

// pass decides one datagram's fate and counts it.
func (p *Proxy) pass(n int) bool {
	if p.blackHole.Load() {
		p.Dropped.Add(1)
		return false
	}
	if m := p.maxSize.Load(); m > 0 && int64(n) > m {
		p.Dropped.Add(1)
		return false
	}
	p.Relayed.Add(1)
	return true
}

// forward reads from clients and sends upstream.
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
		if p.pass(n) {
			back.WriteToUDP(buf[:n], p.target)
		}
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
	b, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	p.backs[key] = b
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.backward(b, client) }()
	return b, nil
}

// backward reads the target's replies to one client and relays them.
func (p *Proxy) backward(b *net.UDPConn, client *net.UDPAddr) {
	buf := make([]byte, maxDatagram)
	for {
		n, _, err := b.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if p.pass(n) {
			p.front.WriteToUDP(buf[:n], client)
		}
	}
}

// Close stops the relay and waits for its goroutines.
func (p *Proxy) Close() error {
	p.closeMu.Do(func() {
		p.mu.Lock()
		p.closed = true
		for _, b := range p.backs {
			b.Close()
		}
		p.mu.Unlock()
		p.front.Close()
		p.wg.Wait()
	})
	return nil
}
