package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A burst passes, then one line per interval, and the next line that
// passes says how many were suppressed.
func TestLogLimit(t *testing.T) {
	l := newLogLimit(100*time.Millisecond, 3)
	now := time.Unix(1000, 0)
	for range 3 {
		ok, n := l.allow(now)
		require.True(t, ok)
		require.Zero(t, n)
	}
	for range 5 {
		ok, _ := l.allow(now)
		require.False(t, ok)
	}
	ok, n := l.allow(now.Add(100 * time.Millisecond))
	require.True(t, ok)
	require.Equal(t, 5, n)
	ok, _ = l.allow(now.Add(150 * time.Millisecond))
	require.False(t, ok, "one per interval after the burst")
	ok, n = l.allow(now.Add(time.Hour))
	require.True(t, ok)
	require.Equal(t, 1, n)
}

func TestClip(t *testing.T) {
	require.Equal(t, "short", clip("short"))
	long := strings.Repeat("x", 15<<20)
	require.Equal(t, strings.Repeat("x", maxEchoBytes)+"...(15728640 bytes)", clip(long))
}
