package commit

import (
	"fmt"
	"log/slog"
	"time"
)

// DefaultInterval is the Periodic sync interval when Config.Interval is 0.
const DefaultInterval = 250 * time.Millisecond

// Syncer makes everything appended so far durable. segment.Log implements
// it (fdatasync, or msync+fdatasync for a mapping). The sequencer calls Sync
// from one goroutine only, never concurrently with itself.
type Syncer interface {
	Sync() error
}

// Config configures a Sequencer. The zero value of every field except Syncer
// is the documented default.
type Config struct {
	// Mode is when to sync; the zero value is Periodic.
	Mode Mode
	// Interval is the Periodic sync interval. 0 means DefaultInterval; it
	// is ignored by the other modes.
	Interval time.Duration
	// MaxDelay, in OnCommit mode, is how long the flusher waits after the
	// first reservation of a round before syncing, to gather more waiters
	// into one sync. 0 (the default) syncs at once: reservations made while
	// a sync runs accumulate for the next one anyway. Measured with
	// BenchmarkOnCommitMaxDelay (2-core VM, fdatasync ≈0.4-0.7 ms), 100 µs
	// and 500 µs raised waiters per sync at concurrency 64 but lowered
	// records/s at 1, 8 and 64; at concurrency 1 every ack got ~1.2 ms
	// slower, because an idle Go runtime on Linux sleeps in ~1 ms steps.
	MaxDelay time.Duration
	// InlineCallbacks says the callbacks never wait for long (nothing
	// like a Block subscriber's full queue): the flusher then runs a
	// round's callbacks itself while the completer has nothing queued, so
	// an acknowledgement leaves as soon as the sync returns, without a
	// goroutine to wake on the way. A callback that does wait holds up
	// the next sync meanwhile.
	InlineCallbacks bool
	// Syncer is what the sequencer syncs. Required.
	Syncer Syncer
	// Logger receives the one error record of a failed sync. nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Mode > Never {
		return fmt.Errorf("%w: unknown Mode %d", ErrInvalidConfig, uint8(c.Mode))
	}
	if c.Interval < 0 {
		return fmt.Errorf("%w: Interval %v is negative", ErrInvalidConfig, c.Interval)
	}
	if c.MaxDelay < 0 {
		return fmt.Errorf("%w: MaxDelay %v is negative", ErrInvalidConfig, c.MaxDelay)
	}
	if c.Syncer == nil {
		return fmt.Errorf("%w: Syncer is nil", ErrInvalidConfig)
	}
	return nil
}
