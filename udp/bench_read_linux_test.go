//go:build linux

package udp_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/linux"
)

// BenchmarkReadBatch is the receive path alone, per packet: GSO sends of
// 10 × 1452-byte packets (what quic-go's sender produces on loopback) are
// queued on the socket with the timer stopped, then read back the way
// quic-go reads, 8 messages of 1452 bytes per ReadBatch. With GRO on that
// is recvmmsg, the split and the copy into the caller's buffers; with GRO
// off the kernel segments on the send side and reads go straight into the
// caller's buffers. ns/op, B/op and cpu-ns/pkt (the process's CPU time
// while reading) are per packet.
func BenchmarkReadBatch(b *testing.B) {
	const seg, segs, sendsPerFill = 1452, 10, 64
	for _, gro := range []bool{true, false} {
		name := "gro=on"
		if !gro {
			name = "gro=off"
		}
		b.Run(name, func(b *testing.B) {
			rx, tx := gsoPair(b, "127.0.0.1:0", gro, false)
			payload := make([]byte, seg*segs)
			oob := segmentCmsgs(seg, 2)
			to := rx.LocalAddr().(*net.UDPAddr)

			ms := make([]ipv4.Message, 8)
			for i := range ms {
				ms[i].Buffers = [][]byte{make([]byte, seg)}
				ms[i].OOB = make([]byte, 128)
			}
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for left := b.N; left > 0; {
				b.StopTimer()
				fill := min(left, sendsPerFill*segs)
				for sent := 0; sent < fill; sent += segs {
					_, _, err := tx.WriteMsgUDP(payload, oob, to)
					require.NoError(b, err)
				}
				b.StartTimer()
				cpu0, _ := linux.ProcessCPUTime()
				for got := 0; got < fill; {
					n, err := rx.ReadBatch(ms, 0)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
				cpu1, _ := linux.ProcessCPUTime()
				cpu += cpu1 - cpu0
				left -= fill
			}
			// CPU time is steadier than wall time on a shared machine.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/pkt")
		})
	}
}
