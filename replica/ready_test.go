package replica

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/testutil"
)

// A write under slowWrite says nothing; a slow one is logged, the next
// ones within a second are counted, and the line after that says how many
// were left out.
func TestSlowWritesAreLoggedAtMostOnceASecond(t *testing.T) {
	var buf testutil.LockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var w slowWrites
	w.note(log, slowWrite-time.Millisecond, 1)
	require.Empty(t, buf.String())
	w.note(log, 2*slowWrite, 3)
	w.note(log, 3*slowWrite, 1)
	w.note(log, 4*slowWrite, 1)
	require.Equal(t, 1, strings.Count(buf.String(), "slow log write and sync"))
	require.Contains(t, buf.String(), "took=200ms entries=3 slow_writes_not_logged=0")
	w.loggedAt = w.loggedAt.Add(-time.Second)
	w.note(log, slowWrite, 2)
	require.Contains(t, buf.String(), "took=100ms entries=2 slow_writes_not_logged=2")
}
