//go:build linux

package linux

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NextCmsg splits the first control message off b (kernel layout, cmsg(3)):
// its level, type and data, and the rest of b after its aligned end.
func NextCmsg(b []byte) (level, typ int32, data, rest []byte, err error) {
	h, d, r, err := unix.ParseOneSocketControlMessage(b)
	if err != nil {
		return 0, 0, nil, nil, fmt.Errorf("parse control message: %w", err)
	}
	return h.Level, h.Type, d, r, nil
}

// CmsgSpace is CMSG_SPACE: the room one control message with n data bytes
// takes, padding included.
func CmsgSpace(n int) int { return unix.CmsgSpace(n) }

// AppendCmsg appends one control message in kernel layout to b.
func AppendCmsg(b []byte, level, typ int32, data []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, unix.CmsgSpace(len(data)))...)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[start]))
	h.Level = level
	h.Type = typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[start+unix.CmsgSpace(0):], data)
	return b
}
