package impair

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rig is a client socket talking through a Proxy to a sink that records
// what arrives (the Up direction) and echoes it (then Down applies too).
type rig struct {
	p      *Proxy
	client *net.UDPConn
	got    chan []byte // what the sink received
}

func newRig(t *testing.T, echo bool) *rig {
	t.Helper()
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { sink.Close() })
	growBuffer(sink)
	r := &rig{got: make(chan []byte, 1<<16)}
	go func() {
		buf := make([]byte, maxDatagram)
		for {
			n, from, err := sink.ReadFromUDP(buf)
			if err != nil {
				return
			}
			r.got <- append([]byte(nil), buf[:n]...)
			if echo {
				sink.WriteToUDP(buf[:n], from)
			}
		}
	}()
	r.p, err = New(sink.LocalAddr().String())
	require.NoError(t, err)
	t.Cleanup(func() { r.p.Close() })
	paddr, err := net.ResolveUDPAddr("udp", r.p.Addr())
	require.NoError(t, err)
	r.client, err = net.DialUDP("udp", nil, paddr)
	require.NoError(t, err)
	t.Cleanup(func() { r.client.Close() })
	return r
}

// send writes n numbered datagrams of size bytes, paced so socket buffers
// never drop (the proxy must be the only thing that loses).
func (r *rig) send(t *testing.T, n, size int) {
	t.Helper()
	b := make([]byte, max(size, 4))
	for i := range n {
		binary.BigEndian.PutUint32(b, uint32(i))
		_, err := r.client.Write(b)
		require.NoError(t, err)
		if i%32 == 31 {
			time.Sleep(time.Millisecond)
		}
	}
}

// collect reads what the sink got until nothing arrives for quiet.
func (r *rig) collect(quiet time.Duration) []uint32 {
	var seqs []uint32
	for {
		select {
		case b := <-r.got:
			seqs = append(seqs, binary.BigEndian.Uint32(b))
		case <-time.After(quiet):
			return seqs
		}
	}
}

func TestPassThrough(t *testing.T) {
	r := newRig(t, true)
	r.send(t, 500, 100)
	require.Len(t, r.collect(100*time.Millisecond), 500)
	buf := make([]byte, 100)
	r.client.SetReadDeadline(time.Now().Add(time.Second))
	_, err := r.client.Read(buf)
	require.NoError(t, err, "the echo came back through the proxy")
	require.Zero(t, r.p.Stats().Dropped())
}

func TestRandomLoss(t *testing.T) {
	r := newRig(t, false)
	r.p.Set(Up, Impairment{Loss: 0.3})
	r.send(t, 4000, 100)
	got := len(r.collect(100 * time.Millisecond))
	require.InDelta(t, 2800, got, 200, "30%% loss of 4000") // ±5 sd
	require.EqualValues(t, 4000-got, r.p.Stats().DroppedLoss)
}

func TestBurstLossComesInRuns(t *testing.T) {
	r := newRig(t, false)
	imp := Impairment{}
	imp.Burst.EnterBad, imp.Burst.ExitBad, imp.Burst.LossInBad = 0.02, 0.2, 1
	r.p.Set(Up, imp)
	r.send(t, 5000, 100)
	seqs := r.collect(100 * time.Millisecond)
	gaps, lost := 0, 0
	for i := 1; i < len(seqs); i++ {
		if d := int(seqs[i] - seqs[i-1] - 1); d > 0 {
			gaps++
			lost += d
		}
	}
	require.Positive(t, gaps)
	require.Greater(t, float64(lost)/float64(gaps), 2.5, "mean burst length (expected ~5)")
}

func TestDelayJitterAndReorder(t *testing.T) {
	r := newRig(t, false)
	r.p.Set(Up, Impairment{Delay: 30 * time.Millisecond})
	start := time.Now()
	r.send(t, 1, 10)
	<-r.got
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)

	r.p.Set(Up, Impairment{Reorder: 0.2, ReorderBy: 3 * time.Millisecond})
	r.send(t, 2000, 100)
	seqs := r.collect(100 * time.Millisecond)
	require.Len(t, seqs, 2000, "reordering loses nothing")
	inversions := 0
	for i := 1; i < len(seqs); i++ {
		if seqs[i] < seqs[i-1] {
			inversions++
		}
	}
	require.Positive(t, inversions)
	require.Positive(t, r.p.Stats().Reordered)
}

func TestDuplicate(t *testing.T) {
	r := newRig(t, false)
	r.p.Set(Up, Impairment{Duplicate: 0.5})
	r.send(t, 2000, 100)
	got := len(r.collect(100 * time.Millisecond))
	require.InDelta(t, 3000, got, 150)
	require.EqualValues(t, got-2000, r.p.Stats().Duplicated)
}

func TestSizeCapAndBlackHole(t *testing.T) {
	r := newRig(t, false)
	r.p.SetMaxDatagram(1200)
	r.send(t, 10, 1201)
	r.send(t, 10, 1200)
	require.Len(t, r.collect(100*time.Millisecond), 10)
	require.EqualValues(t, 10, r.p.Stats().DroppedSize)

	r.p.SetMaxDatagram(0)
	r.p.BlackHoleFor(150 * time.Millisecond)
	r.send(t, 10, 100)
	require.Empty(t, r.collect(50*time.Millisecond))
	time.Sleep(150 * time.Millisecond)
	r.send(t, 10, 100)
	require.Len(t, r.collect(100*time.Millisecond), 10, "the black hole ends on time")
	require.EqualValues(t, 10, r.p.Stats().DroppedBlackHole)
}
