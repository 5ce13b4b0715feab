package udp_test

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/linux"
	"github.com/felixmq/felix/ioruntime"
	"github.com/felixmq/felix/udp"
)

// BenchmarkTransfer moves 16 MiB (256 MiB with FELIX_BENCH_FULL=1) per iteration over one quic-go stream on
// loopback, client and server in this process, over (a) a stock
// *net.UDPConn, (b) udp.Conn with reads inline, (c) udp.Conn with a pinned
// reader. Interleave rounds with -count, e.g.
//
//	go test ./udp/ -run '^$' -bench Transfer -benchtime 1x -count 3
//
// Metrics: MiB/s; lost_pkts (declared lost by the sending client) and
// queue_drops (dropped by the server for a full per-connection queue) per
// run; dgrams/call and pkts/dgram on the receiving conn (felix
// only: quic-go's own recvmmsg is not observable); cpu-s/GiB is the whole
// process's getrusage user+system time, both ends included.
func BenchmarkTransfer(b *testing.B) {
	size := 16 << 20 // bench-smoke; the recorded figures use 256 MiB
	if os.Getenv("FELIX_BENCH_FULL") != "" {
		size = 256 << 20
	}
	for _, bc := range []struct {
		name    string
		threads int
		stdlib  bool
	}{
		{name: "stdlib", stdlib: true},
		{name: "felix"},
		{name: "felix-pinned", threads: 1},
	} {
		b.Run("conn="+bc.name, func(b *testing.B) {
			var rt *ioruntime.Runtime
			if bc.threads > 0 {
				var err error
				rt, err = ioruntime.New(ioruntime.Config{Threads: 2})
				require.NoError(b, err)
				defer rt.Close()
			}
			open := func(role ioruntime.Role) (net.PacketConn, *udp.Conn) {
				if bc.stdlib {
					uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
					require.NoError(b, err)
					return uc, nil
				}
				cfg := udp.Config{}
				if rt != nil {
					cfg.Reader = rt.Assign(role, 0)
				}
				c, err := udp.Listen("udp4", "127.0.0.1:0", cfg)
				require.NoError(b, err)
				return c, c
			}
			var elapsed, cpu time.Duration
			var calls, dgrams, pkts, lost, drops uint64
			for b.Loop() {
				spc, sc := open(ioruntime.RoleServer)
				cpc, _ := open(ioruntime.RoleClient)
				cpu0, _ := linux.ProcessCPUTime()
				res := transfer(b, spc, cpc, size)
				cpu1, _ := linux.ProcessCPUTime()
				elapsed += res.elapsed
				lost += res.client.PacketsLost
				drops += res.server.QueueDrops
				cpu += cpu1 - cpu0
				if sc != nil {
					s := sc.Stats()
					calls, dgrams, pkts = calls+s.RecvCalls, dgrams+s.DatagramsIn, pkts+s.PacketsIn
				}
				spc.Close()
				cpc.Close()
			}
			gib := float64(b.N) * float64(size) / (1 << 30)
			b.ReportMetric(float64(b.N)*float64(size)/(1<<20)/elapsed.Seconds(), "MiB/s")
			b.ReportMetric(cpu.Seconds()/gib, "cpu-s/GiB")
			// Losses cost CPU twice (retransmission, smaller congestion
			// window so fewer packets per GSO send): report them per run.
			b.ReportMetric(float64(lost)/float64(b.N), "lost_pkts")
			b.ReportMetric(float64(drops)/float64(b.N), "queue_drops")
			if calls > 0 {
				b.ReportMetric(float64(dgrams)/float64(calls), "dgrams/call")
				b.ReportMetric(float64(pkts)/float64(dgrams), "pkts/dgram")
			}
			b.SetBytes(int64(size))
		})
	}
}
