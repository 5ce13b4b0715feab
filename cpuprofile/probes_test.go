package cpuprofile

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSoftirqNames(t *testing.T) {
	require.Equal(t, "hi", SoftirqName(0))
	require.Equal(t, "net_rx", SoftirqName(3))
	require.Equal(t, "rcu", SoftirqName(NumSoftirqs-1))
	require.Empty(t, SoftirqName(NumSoftirqs))
	require.Empty(t, SoftirqName(-1))
}

func TestBlockIOSlotRange(t *testing.T) {
	for _, tc := range []struct {
		slot   int
		lo, hi time.Duration
	}{
		{0, 0, 2 * time.Microsecond},
		{1, 2 * time.Microsecond, 4 * time.Microsecond},
		{10, 1024 * time.Microsecond, 2048 * time.Microsecond},
		{BlockIOSlots - 1, time.Microsecond << (BlockIOSlots - 1), 0},
		{BlockIOSlots, 0, 0},
	} {
		lo, hi := BlockIOSlotRange(tc.slot)
		require.Equal(t, []time.Duration{tc.lo, tc.hi}, []time.Duration{lo, hi}, "slot %d", tc.slot)
	}
}

func TestProbeDeltas(t *testing.T) {
	prev := BlockIOHist{Count: 2, Total: time.Millisecond}
	prev.Slots[3] = 2
	cur := BlockIOHist{Count: 5, Total: 4 * time.Millisecond}
	cur.Slots[3], cur.Slots[9] = 3, 2
	want := BlockIOHist{Count: 3, Total: 3 * time.Millisecond}
	want.Slots[3], want.Slots[9] = 1, 2
	require.Equal(t, want, cur.Sub(prev))

	before := []SoftirqCPU{{CPU: 0}}
	before[0].Vectors[3] = SoftirqVector{Name: "net_rx", Time: time.Millisecond, Count: 10}
	after := []SoftirqCPU{{CPU: 0}, {CPU: 1}}
	after[0].Vectors[3] = SoftirqVector{Name: "net_rx", Time: 3 * time.Millisecond, Count: 15}
	after[1].Vectors[1] = SoftirqVector{Name: "timer", Time: time.Microsecond, Count: 1}
	d := SubSoftirq(after, before)
	require.Equal(t, SoftirqVector{Name: "net_rx", Time: 2 * time.Millisecond, Count: 5}, d[0].Vectors[3])
	require.Equal(t, after[1], d[1])
}

func TestProbeJSONNames(t *testing.T) {
	cpu := SoftirqCPU{CPU: 1}
	cpu.Vectors[3] = SoftirqVector{Name: "net_rx", Time: 5, Count: 2}
	b, err := json.Marshal(cpu)
	require.NoError(t, err)
	require.Contains(t, string(b), `{"cpu":1,"vectors":[`)
	require.Contains(t, string(b), `{"name":"net_rx","time_ns":5,"count":2}`)

	b, err = json.Marshal(BlockIOHist{Count: 1, Total: 7})
	require.NoError(t, err)
	require.Contains(t, string(b), `{"count":1,"total_ns":7,"slots":[0,`)
}
