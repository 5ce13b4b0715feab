package linux

import (
	"errors"
	"syscall"
)

// ErrNotSupported is wrapped by every error that means "this platform,
// kernel or file system cannot do that": the caller should take its portable
// path instead.
var ErrNotSupported = errors.New("linux: not supported")

// IsNoSpace reports whether err says the file system is full (ENOSPC) or
// the user's quota is (EDQUOT): conditions that pass when space returns.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// IsConnRefused reports whether err says nothing listens on the peer's
// port (ECONNREFUSED, which a connected UDP socket gets from an ICMP port
// unreachable).
func IsConnRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
