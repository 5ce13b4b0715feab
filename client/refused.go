package client

import (
	"errors"
	"net"

	"github.com/felixmq/felix/internal/linux"
)

// ErrConnectionRefused: the broker's host answered that nothing listens on
// the port (an ICMP port unreachable, which the kernel reports on a
// connected UDP socket). QUIC alone only times out; Dial reports this at
// once instead, and the errors of a connection whose broker process died
// while answers were due wrap it (Config.SilentPeerTimeout).
var ErrConnectionRefused = errors.New("client: connection refused")

// watchRefused sends one empty datagram to raddr from a connected UDP
// socket of its own and, if the kernel reports the port closed before
// stop is called, calls refused (on a goroutine of its own). A broker
// drops the datagram (quic-go ignores an empty one). stop closes the
// socket and waits for the watcher.
func watchRefused(raddr *net.UDPAddr, refused func()) (stop func()) {
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return func() {} // the QUIC dial will say what is wrong
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		_, err := conn.Write(b[:0])
		if err == nil {
			_, err = conn.Read(b[:])
		}
		if linux.IsConnRefused(err) {
			refused()
		}
	}()
	return func() {
		conn.Close()
		<-done
	}
}
