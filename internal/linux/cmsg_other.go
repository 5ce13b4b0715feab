//go:build !linux

package linux

import "fmt"

// NextCmsg is Linux-only: control messages elsewhere are never parsed by
// Felix (the portable udp path passes them through untouched).
func NextCmsg(b []byte) (level, typ int32, data, rest []byte, err error) {
	return 0, 0, nil, nil, fmt.Errorf("%w: control messages", ErrNotSupported)
}

// CmsgSpace is only meaningful on Linux; it returns n here.
func CmsgSpace(n int) int { return n }

// AppendCmsg is Linux-only and returns b unchanged here.
func AppendCmsg(b []byte, level, typ int32, data []byte) []byte { return b }
