//go:build linux

package udp

import (
	"os"

	"github.com/felixmq/felix/internal/linux"
)

// sizeBuffers asks for want bytes of SO_RCVBUF and SO_SNDBUF, retries with
// the FORCE variants when running as root (they ignore net.core.rmem_max /
// wmem_max, socket(7)), and reads the result back. Linux reports twice what
// was granted; like quic-go (sys_conn_buffers.go) we compare the read-back
// value with what we asked for, so quic-go's own check, which wants 7 MiB,
// then finds nothing to do.
func sizeBuffers(raw linux.RawConn, want int) (rcv, snd int, clamped bool, err error) {
	force := os.Geteuid() == 0
	one := func(fd uintptr, send bool) int {
		_ = linux.SetSocketBuffer(fd, send, want, false)
		got, _ := linux.SocketBuffer(fd, send)
		if got < want && force {
			_ = linux.SetSocketBuffer(fd, send, want, true)
			got, _ = linux.SocketBuffer(fd, send)
		}
		return got
	}
	err = raw.Control(func(fd uintptr) {
		rcv = one(fd, false)
		snd = one(fd, true)
	})
	return rcv, snd, rcv < want || snd < want, err
}
