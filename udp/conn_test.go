package udp_test

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/linux"
	"github.com/felixmq/felix/ioruntime"
	"github.com/felixmq/felix/udp"
)

// mode is one way of running the conn; every functional test runs in each.
type mode struct {
	name    string
	cfg     udp.Config
	threads int
	// quicGSOOff sets QUIC_GO_DISABLE_GSO=true, as the binary does for
	// FELIX_UDP_GSO=false (see the package doc).
	quicGSOOff bool
}

var offloadsOff = udp.Config{DisableGRO: true, DisableGSO: true}

var modes = []mode{
	{name: "inline"},
	{name: "offloads-off", cfg: offloadsOff, quicGSOOff: true},
	{name: "pinned", threads: 1},
	{name: "pinned-offloads-off", cfg: offloadsOff, threads: 1, quicGSOOff: true},
	// Config.DisableGSO alone: quic-go still batches, the conn segments.
	{name: "gso-off-conn-only", cfg: udp.Config{DisableGSO: true}},
}

// listen opens a conn in mode m on 127.0.0.1; cleanup closes it and the
// runtime.
func listen(t testing.TB, m mode) *udp.Conn {
	t.Helper()
	cfg := m.cfg
	if m.threads > 0 {
		rt, err := ioruntime.New(ioruntime.Config{Threads: m.threads})
		require.NoError(t, err)
		t.Cleanup(func() { rt.Close() })
		cfg.Reader = rt.Assign(ioruntime.RoleServer, 0)
	}
	c, err := udp.Listen("udp4", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func messages(n int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 1452)}
		ms[i].OOB = make([]byte, 128)
	}
	return ms
}

// TestQUICOverConn: a quic-go server and client, each on its own Conn,
// move 32 MiB over one stream intact; with offloads on quic-go reports GSO
// and we saw GSO sends and GRO aggregates; with them off, neither.
func TestQUICOverConn(t *testing.T) {
	size := 32 << 20
	if testing.Short() {
		size = 4 << 20
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			if m.quicGSOOff {
				t.Setenv("QUIC_GO_DISABLE_GSO", "true")
			}
			s, c := listen(t, m), listen(t, m)
			res := transfer(t, s, c, size)
			ss, cs := s.Stats(), c.Stats()
			t.Logf("%v: server %+v", res.elapsed, ss)
			t.Logf("client conn stats %+v", res.client)
			require.Positive(t, ss.PacketsIn)
			require.Zero(t, ss.ReadErrors)
			require.Zero(t, cs.WriteErrors)
			require.Equal(t, 1452, res.client.MTU, "loopback peers run at 1452")
			if !linux.Supported {
				require.False(t, res.clientGSO)
				return
			}
			switch {
			case m.quicGSOOff:
				require.False(t, res.clientGSO, "QUIC_GO_DISABLE_GSO must turn quic-go's GSO off")
				require.Zero(t, cs.GSOSends)
				require.Zero(t, cs.GSOSplit, "quic-go never asked for GSO")
			case m.cfg.DisableGSO:
				require.True(t, res.clientGSO, "quic-go was not told")
				require.Zero(t, cs.GSOSends, "no UDP_SEGMENT may reach the kernel")
				require.Positive(t, cs.GSOSplit)
			default:
				require.True(t, res.clientGSO, "quic-go fell back from GSO")
				require.True(t, res.serverGSO)
				require.Positive(t, cs.GSOSends)
			}
			if m.cfg.DisableGRO {
				require.False(t, ss.GRO)
				require.Zero(t, ss.GROBatches)
				require.Equal(t, ss.DatagramsIn, ss.PacketsIn)
			} else {
				require.True(t, ss.GRO)
				if !m.cfg.DisableGSO {
					// Loopback keeps a GSO send whole for a GRO socket; without
					// GSO on the sender there is nothing to aggregate.
					require.Positive(t, ss.GROBatches, "GSO sends over loopback should arrive as GRO aggregates")
				}
			}
		})
	}
}

// TestReadBatchReturnsOnClose: a blocked read ends with net.ErrClosed, a
// non-temporary error, so quic-go's read loop stops.
func TestReadBatchReturnsOnClose(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c := listen(t, m)
			errc := make(chan error, 1)
			go func() {
				_, err := c.ReadBatch(messages(8), 0)
				errc <- err
			}()
			require.NoError(t, c.Close())
			err := <-errc
			require.ErrorIs(t, err, net.ErrClosed)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			require.False(t, ne.Timeout())
			require.NoError(t, c.Close(), "Close is idempotent")
		})
	}
}

// TestReadBatchReturnsOnDeadline: a read past its deadline ends with a
// timeout that quic-go treats as temporary; clearing it makes reads work.
func TestReadBatchReturnsOnDeadline(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c := listen(t, m)
			errc := make(chan error, 1)
			go func() {
				_, err := c.ReadBatch(messages(8), 0)
				errc <- err
			}()
			require.NoError(t, c.SetReadDeadline(time.Now()))
			err := <-errc
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			require.True(t, ne.Timeout())
			require.True(t, ne.Temporary()) //nolint:staticcheck // quic-go checks it

			require.NoError(t, c.SetReadDeadline(time.Time{}))
			tx, err := net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr))
			require.NoError(t, err)
			defer tx.Close()
			_, err = tx.Write([]byte("after the deadline"))
			require.NoError(t, err)
			ms := messages(8)
			n, err := c.ReadBatch(ms, 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, "after the deadline", string(ms[0].Buffers[0][:ms[0].N]))
			require.Equal(t, tx.LocalAddr().String(), ms[0].Addr.(*net.UDPAddr).String())
		})
	}
}

// TestTransportCloseWakesReader: quic-go's Transport.Close on a conn it did
// not create sets a read deadline and waits for its read loop; that must
// return.
func TestTransportCloseWakesReader(t *testing.T) {
	stls, _ := tlsPair(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c := listen(t, m)
			tr := &quic.Transport{Conn: c}
			ln, err := tr.Listen(stls, nil)
			require.NoError(t, err)
			require.NoError(t, ln.Close())
			require.NoError(t, tr.Close())
			_, err = c.WriteTo([]byte("conn still usable"), c.LocalAddr())
			require.NoError(t, err)
		})
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := udp.Listen("udp4", "127.0.0.1:0", udp.Config{BatchSize: -1})
	require.True(t, errors.Is(err, udp.ErrInvalidConfig))
	_, err = udp.Listen("udp4", "127.0.0.1:0", udp.Config{HandoffDepth: 1000})
	require.ErrorIs(t, err, udp.ErrInvalidConfig)
}

func TestSocketBuffersSized(t *testing.T) {
	c := listen(t, mode{})
	s := c.Stats()
	if !linux.Supported {
		require.Zero(t, s.RecvBufferBytes, "not read back off Linux")
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for SO_RCVBUFFORCE; without it the size depends on net.core.rmem_max")
	}
	require.GreaterOrEqual(t, s.RecvBufferBytes, udp.DefaultSocketBufferBytes)
	require.GreaterOrEqual(t, s.SendBufferBytes, udp.DefaultSocketBufferBytes)
	_ = runtime.GOOS
}
