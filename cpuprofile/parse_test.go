package cpuprofile

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A thread named by ioruntime, as /proc/PID/task/TID/stat prints it.
const felixIOStat = "12345 (felix-io-0) R 1 12340 12340 0 -1 4194368 1200 0 0 0 250 37 0 0 20 0 9 0 971387 " +
	"3133440 359 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     pidStat
	}{
		{"ioruntime thread", felixIOStat, pidStat{
			id: 12345, name: "felix-io-0", state: "R", numThreads: 9,
			user: 2500 * time.Millisecond, system: 370 * time.Millisecond, start: 9713870 * time.Millisecond,
		}},
		{"parentheses and spaces in comm", "77 (a) b (c) S 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 42\n", pidStat{
			id: 77, name: "a) b (c", state: "S", numThreads: 1,
			user: 50 * time.Millisecond, system: 60 * time.Millisecond, start: 420 * time.Millisecond,
		}},
		{"comm ending in a parenthesis", "8 (x)) D 1 8 8 0 -1 0 0 0 0 0 1 2 0 0 20 0 3 0 4", pidStat{
			id: 8, name: "x)", state: "D", numThreads: 3,
			user: 10 * time.Millisecond, system: 20 * time.Millisecond, start: 40 * time.Millisecond,
		}},
		{"empty comm", "9 () S 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 0", pidStat{id: 9, state: "S", numThreads: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseStatRejectsMalformed(t *testing.T) {
	for name, in := range map[string]string{
		"empty":             "",
		"no comm":           "123 R 1 2 3",
		"unclosed comm":     "123 (felix-io-0 R 1 2 3",
		"pid not a number":  "abc (x) R 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 42",
		"negative pid":      "-1 (x) R 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 42",
		"truncated":         "77 (x) R 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0",
		"utime not numeric": "77 (x) R 1 77 77 0 -1 0 0 0 0 0 five 6 0 0 20 0 1 0 42",
		"negative stime":    "77 (x) R 1 77 77 0 -1 0 0 0 0 0 5 -6 0 0 20 0 1 0 42",
		"utime overflows":   "77 (x) R 1 77 77 0 -1 0 0 0 0 0 922337203686 6 0 0 20 0 1 0 42",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseStat([]byte(in))
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
}

// procStat is /proc/stat of a 2-CPU machine on Linux 6.18, intr line cut.
const procStat = `cpu  900778 0 354008 593395 47777 0 25285 0 0 0
cpu0 467126 0 158513 318760 6043 0 9568 0 0 0
cpu1 433652 0 195494 274634 41733 0 15717 0 0 0
intr 98017161 0 0 0 0
ctxt 2305843
btime 1764480000
processes 2772
procs_running 1
procs_blocked 0
softirq 5290290 0 1402358 3 113390 26427 0 21 1820770 0 1927321
`

func TestParseSystemStat(t *testing.T) {
	ms := func(ticks int64) time.Duration { return time.Duration(ticks) * 10 * time.Millisecond }
	got, err := parseSystemStat([]byte(procStat))
	require.NoError(t, err)
	require.Equal(t, SystemCPU{
		Total: CPUTimes{User: ms(900778), System: ms(354008), Idle: ms(593395), IOWait: ms(47777), SoftIRQ: ms(25285)},
		CPUs: []CPUStat{
			{ID: 0, CPUTimes: CPUTimes{User: ms(467126), System: ms(158513), Idle: ms(318760), IOWait: ms(6043), SoftIRQ: ms(9568)}},
			{ID: 1, CPUTimes: CPUTimes{User: ms(433652), System: ms(195494), Idle: ms(274634), IOWait: ms(41733), SoftIRQ: ms(15717)}},
		},
	}, got)

	t.Run("offline CPU and old kernel columns", func(t *testing.T) {
		got, err := parseSystemStat([]byte("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu2 0 0 0 0 5 6 7 8 9 10\n"))
		require.NoError(t, err)
		require.Equal(t, CPUTimes{User: ms(1), Nice: ms(2), System: ms(3), Idle: ms(4)}, got.Total)
		require.Len(t, got.CPUs, 2)
		require.Equal(t, 2, got.CPUs[1].ID)
		require.Equal(t, CPUTimes{IOWait: ms(5), IRQ: ms(6), SoftIRQ: ms(7), Steal: ms(8)}, got.CPUs[1].CPUTimes)
	})
}

func TestParseSystemStatRejectsMalformed(t *testing.T) {
	for name, in := range map[string]string{
		"empty":            "",
		"no aggregate":     "cpu0 1 2 3 4\n",
		"too few columns":  "cpu  1 2 3\n",
		"bad CPU name":     "cpu  1 2 3 4\ncpux 1 2 3 4\n",
		"negative counter": "cpu  1 -2 3 4\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseSystemStat([]byte(in))
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
}

// FuzzParseStat feeds both parsers arbitrary bytes: neither may panic, and
// what parseStat accepts must be consistent with its input.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte(felixIOStat))
	f.Add([]byte(procStat))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := parseStat(b); err == nil {
			if s.id < 0 || s.numThreads < 0 || s.user < 0 || s.system < 0 || s.start < 0 {
				t.Fatalf("negative field in %+v", s)
			}
			if !bytes.Contains(b, []byte("("+s.name+")")) {
				t.Fatalf("name %q is not the bracketed comm of %q", s.name, b)
			}
		}
		if sys, err := parseSystemStat(b); err == nil {
			for _, c := range append([]CPUStat{{CPUTimes: sys.Total}}, sys.CPUs...) {
				if c.ID < 0 || c.User < 0 || c.Idle < 0 || c.Steal < 0 {
					t.Fatalf("negative field in %+v", c)
				}
			}
		}
	})
}
