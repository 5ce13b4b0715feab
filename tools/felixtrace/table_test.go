package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFormats(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", 850: "850ns", 1500: "1.50µs", 212 * time.Microsecond: "212µs",
		1048575: "1.05ms", 16777215: "16.8ms", 1500 * time.Millisecond: "1.50s"} {
		require.Equal(t, want, fmtDur(d))
	}
	for v, want := range map[float64]string{0: "0 B", 999: "999 B", 13e6: "13.0 MB", 6.09e6: "6.09 MB", 2.5e12: "2.50 TB", 4e15: "4000 TB"} {
		require.Equal(t, want, fmtBytes(v))
	}
	require.Equal(t, "60.3k", fmtCount(60321))
}
