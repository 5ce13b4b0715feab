package fanout

import "errors"

var (
	// ErrClosed is returned by operations on a closed Queue. A push that
	// fails with ErrClosed still consumed the caller's reference.
	ErrClosed = errors.New("fanout: queue closed")

	// ErrLagging is returned to the consumer of a CatchUp queue that
	// refuses pushes: it must read what it missed elsewhere, then Resume.
	ErrLagging = errors.New("fanout: queue lagging")

	// ErrNoEvents is returned by Push for a buffer whose Events is not
	// positive. Capacity is counted in events, so such a buffer would occupy
	// no space and could make the queue unbounded.
	ErrNoEvents = errors.New("fanout: buffer carries no events")

	// ErrInvalidConfig is wrapped by the constructors when a Config field is
	// out of range; the message names the field.
	ErrInvalidConfig = errors.New("fanout: invalid config")
)
