package cpuprofile

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDeltaJoinsThreadsByTIDAndStart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	prev := Snapshot{
		At:      t0,
		Process: ProcessCPU{PID: 10, User: ms(1000), System: ms(500)},
		Threads: []Thread{
			{TID: 10, Name: "felix-broker", User: ms(900), System: ms(400), Start: ms(50)},
			{TID: 11, Name: "felix-io-0", User: ms(100), System: ms(100), Start: ms(60)},
			{TID: 12, Name: "gone", Start: ms(70)},
			{TID: 13, Name: "old", User: ms(300), Start: ms(80)},
		},
	}
	cur := Snapshot{
		At:      t0.Add(2 * time.Second),
		Process: ProcessCPU{PID: 10, User: ms(1600), System: ms(700)},
		Threads: []Thread{
			{TID: 10, Name: "felix-broker", User: ms(1000), System: ms(400), Start: ms(50)},
			{TID: 11, Name: "felix-io-0", State: "R", User: ms(500), System: ms(200), Start: ms(60)},
			// TID 13 exited and the kernel gave its number to a new thread.
			{TID: 13, Name: "reused", User: ms(20), Start: ms(90000)},
			{TID: 14, Name: "new", System: ms(40), Start: ms(91000)},
		},
	}
	s := Delta(prev, cur)
	require.Equal(t, 2*time.Second, s.Interval)
	require.InDelta(t, 0.3, s.Process.User, 1e-9)
	require.InDelta(t, 0.1, s.Process.System, 1e-9)
	require.Equal(t, []ThreadRates{
		{TID: 10, Name: "felix-broker", Rates: Rates{User: 0.05}},
		{TID: 11, Name: "felix-io-0", State: "R", Rates: Rates{User: 0.2, System: 0.05}},
		{TID: 13, Name: "reused", Rates: Rates{User: 0.01}, New: true},
		{TID: 14, Name: "new", Rates: Rates{System: 0.02}, New: true},
	}, s.Threads)
	require.Equal(t, []ExitedThread{{TID: 12, Name: "gone"}, {TID: 13, Name: "old"}}, s.Exited)
}

func TestDeltaSplitsSystemTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	prev := Snapshot{At: t0, System: SystemCPU{
		Total: CPUTimes{User: sec(10), Nice: sec(1), System: sec(5), Idle: sec(100), IOWait: sec(3), SoftIRQ: sec(2)},
		CPUs: []CPUStat{
			{ID: 0, CPUTimes: CPUTimes{User: sec(5), Idle: sec(50), IOWait: sec(3)}},
			{ID: 1, CPUTimes: CPUTimes{User: sec(5), Idle: sec(50)}},
		},
	}}
	cur := Snapshot{At: t0.Add(time.Second), System: SystemCPU{
		Total: CPUTimes{User: sec(10.5), Nice: sec(1.1), System: sec(5.2), Idle: sec(101), IOWait: sec(2.9), SoftIRQ: sec(2.1)},
		CPUs: []CPUStat{
			// iowait went backwards, which proc.rst says it may.
			{ID: 0, CPUTimes: CPUTimes{User: sec(5.5), Idle: sec(50.4), IOWait: sec(2.9)}},
			{ID: 1, CPUTimes: CPUTimes{User: sec(5.1), Idle: sec(50.6)}},
			{ID: 2, CPUTimes: CPUTimes{Idle: sec(1)}}, // came online
		},
	}}
	s := Delta(prev, cur)
	near := func(want, got CPUSplit) {
		t.Helper()
		require.InDeltaSlice(t,
			[]float64{want.User, want.System, want.IRQ, want.SoftIRQ, want.IOWait, want.Idle, want.Steal},
			[]float64{got.User, got.System, got.IRQ, got.SoftIRQ, got.IOWait, got.Idle, got.Steal}, 1e-9)
	}
	near(CPUSplit{User: 0.6, System: 0.2, SoftIRQ: 0.1, Idle: 1}, s.System)
	require.Len(t, s.CPUs, 2)
	require.Equal(t, []int{0, 1}, []int{s.CPUs[0].ID, s.CPUs[1].ID})
	near(CPUSplit{User: 0.5, Idle: 0.4}, s.CPUs[0].CPUSplit)
	near(CPUSplit{User: 0.1, Idle: 0.6}, s.CPUs[1].CPUSplit)
}

func TestDeltaWithoutIntervalHasNoRates(t *testing.T) {
	at := time.Unix(1000, 0)
	s := Delta(Snapshot{At: at}, Snapshot{At: at, Process: ProcessCPU{User: time.Second}})
	require.Equal(t, Sample{}, s)
}

// felixtrace prints Samples (Delta of two broker Snapshots) and writes
// them: the JSON names are part of that interface.
func TestSampleJSONNames(t *testing.T) {
	s := Sample{
		Interval: time.Second,
		Threads:  []ThreadRates{{TID: 1, Name: "felix-io-0", State: "S", New: true}},
		Exited:   []ExitedThread{{TID: 2, Name: "x"}},
		CPUs:     []CPURates{{ID: 1}},
	}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"interval_ns": 1000000000,
		"process": {"user": 0, "system": 0},
		"threads": [{"tid": 1, "name": "felix-io-0", "state": "S", "user": 0, "system": 0, "new": true}],
		"exited_threads": [{"tid": 2, "name": "x"}],
		"system": {"user": 0, "system": 0, "irq": 0, "softirq": 0, "iowait": 0, "idle": 0, "steal": 0},
		"cpus": [{"cpu": 1, "user": 0, "system": 0, "irq": 0, "softirq": 0, "iowait": 0, "idle": 0, "steal": 0}]
	}`, string(b))

	b, err = json.Marshal(SystemCPU{CPUs: []CPUStat{{ID: 3}}})
	require.NoError(t, err)
	require.Contains(t, string(b), `"cpus":[{"cpu":3,"user_ns":0,"nice_ns":0,"system_ns":0,"idle_ns":0,"iowait_ns":0,"irq_ns":0,"softirq_ns":0,"steal_ns":0}]`)
}
