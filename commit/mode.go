package commit

import "fmt"

// Mode says when the sequencer syncs and what a completed reservation means.
// The zero value is Periodic, the documented default (docs/design.md, "Semantics").
type Mode uint8

const (
	// Periodic syncs every Config.Interval if anything was reserved since
	// the last sync. Reservations complete in order without waiting for a
	// sync, so up to one interval of acknowledged records can be lost on a
	// crash. One goroutine does both jobs, so a reservation staged while a
	// periodic sync runs completes when that sync returns (one sync per
	// interval).
	Periodic Mode = iota
	// OnCommit completes a reservation only after a Sync that began after
	// the reservation was made: a completed reservation survives kill -9
	// and power loss. Concurrent reservations share one sync (group commit).
	OnCommit
	// Never syncs only on Flush and Close; the OS writes back when it likes.
	// Reservations complete in order without waiting.
	Never
)

var modeNames = [...]string{Periodic: "periodic", OnCommit: "on_commit", Never: "never"}

// String returns the knob spelling: "periodic", "on_commit" or "never".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses the knob spelling of a Mode. It accepts exactly
// "on_commit", "periodic" and "never"; anything else wraps ErrUnknownMode.
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want on_commit, periodic or never)", ErrUnknownMode, s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) {
	if int(m) >= len(modeNames) {
		return nil, fmt.Errorf("%w %d", ErrUnknownMode, uint8(m))
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseMode.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
