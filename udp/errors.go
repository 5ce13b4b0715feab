package udp

import (
	"errors"
	"net"
	"os"

	"github.com/felixmq/felix/internal/linux"
)

var (
	// ErrNotSupported wraps every "this platform or kernel cannot do that"
	// error (GRO, GSO, socket buffer read-back off Linux).
	ErrNotSupported = linux.ErrNotSupported

	// ErrInvalidConfig wraps configuration errors.
	ErrInvalidConfig = errors.New("udp: invalid config")

	// errEmptyBatch: ReadBatch was handed no messages. Returning (0, nil)
	// instead would make quic-go replay stale slots.
	errEmptyBatch = errors.New("udp: ReadBatch with no messages")
)

// opError dresses err the way *net.UDPConn reports read errors, so callers
// can use net.Error (Timeout, Temporary) and errors.Is(err, net.ErrClosed).
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: c.laddr, Err: err}
}

func (c *Conn) closedError() error { return c.opError("read", net.ErrClosed) }

// timeoutError is what a read past its deadline returns: a net.Error with
// Timeout and Temporary true, like the standard library's, which is what
// quic-go's Transport.Close relies on to stop its read loop.
func (c *Conn) timeoutError() error { return c.opError("read", os.ErrDeadlineExceeded) }

// temporary reports whether a read error leaves the socket usable.
func temporary(err error) bool {
	var ne net.Error
	//nolint:staticcheck // Temporary is what quic-go's read loop checks.
	return errors.As(err, &ne) && (ne.Timeout() || ne.Temporary())
}
