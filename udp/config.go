package udp

import (
	"fmt"
	"log/slog"

	"github.com/felixmq/felix/ioruntime"
)

// DefaultSocketBufferBytes is the receive and send buffer size asked for
// when Config.SocketBufferBytes is 0 (FELIX_SOCKET_BUFFER_BYTES).
const DefaultSocketBufferBytes = 8 << 20

const (
	defaultBatchSize    = 16
	defaultHandoffDepth = 4
	maxBatchSize        = 1024

	// groBufferSize holds the largest datagram the kernel can hand over:
	// a GRO aggregate is capped at 64 KiB (UDP's 16-bit length).
	groBufferSize = 64 << 10
	// plainBufferSize holds one QUIC packet (quic-go never sends more than
	// 1452 bytes; anything larger would be truncated by quic-go anyway).
	plainBufferSize = 2048
	// oobBufferSize is the room for the kernel's control messages of one
	// datagram: IP_TOS or IPV6_TCLASS, IP_PKTINFO or IPV6_PKTINFO, UDP_GRO.
	oobBufferSize = 256
	// quicOOBSize is what quic-go gives us per message (oobBufferSize in
	// quic-go sys_conn_oob.go); carried control messages must fit.
	quicOOBSize = 128
)

// Config configures a Conn. The zero value is the Linux default: GRO and
// GSO on, 8 MiB socket buffers, reads inline on the caller's goroutine.
type Config struct {
	// DisableGRO leaves UDP_GRO off (FELIX_UDP_GRO=false). Reads then go
	// straight into the caller's buffers with recvmmsg.
	DisableGRO bool
	// DisableGSO keeps UDP_SEGMENT away from the kernel
	// (FELIX_UDP_GSO=false): a quic-go GSO batch is sent one sendmsg per
	// packet. To make quic-go itself see no GSO (ConnectionState().GSO
	// false, no batching) the binary must also set QUIC_GO_DISABLE_GSO=true
	// before creating a Transport; see the package doc.
	DisableGSO bool
	// SocketBufferBytes is asked for SO_RCVBUF and SO_SNDBUF
	// (FELIX_SOCKET_BUFFER_BYTES); 0 means DefaultSocketBufferBytes, a
	// negative value leaves the kernel default.
	SocketBufferBytes int
	// BatchSize is the number of datagrams one recvmmsg may return; 0
	// means 16. Each costs a 64 KiB buffer with GRO on.
	BatchSize int
	// Reader, when set, runs the socket reads on that pinned I/O thread and
	// hands batches to ReadBatch through a handoff of HandoffDepth batches. Nil
	// (FELIX_IO_RUNTIME_THREADS=0) reads inline in ReadBatch.
	Reader *ioruntime.Thread
	// HandoffDepth is the number of batches between a pinned reader and
	// ReadBatch; 0 means 4. Ignored without Reader.
	HandoffDepth int
	// Logger receives the once-per-process buffer clamp warning and debug
	// notes about offloads; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.SocketBufferBytes == 0 {
		c.SocketBufferBytes = DefaultSocketBufferBytes
	}
	if c.BatchSize == 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.HandoffDepth == 0 {
		c.HandoffDepth = defaultHandoffDepth
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.BatchSize < 1 || c.BatchSize > maxBatchSize {
		return fmt.Errorf("%w: BatchSize %d not in [1, %d]", ErrInvalidConfig, c.BatchSize, maxBatchSize)
	}
	if c.HandoffDepth < 1 || c.HandoffDepth > 64 {
		return fmt.Errorf("%w: HandoffDepth %d not in [1, 64]", ErrInvalidConfig, c.HandoffDepth)
	}
	return nil
}
