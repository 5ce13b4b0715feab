package broker

import (
	"errors"
	"fmt"
)

var (
	// ErrStreamNotFound: the tenant/namespace/stream is not registered.
	ErrStreamNotFound = errors.New("stream not found")
	// ErrStreamExists: a stream with that name is already registered.
	ErrStreamExists = errors.New("stream already exists")
	// ErrInvalidStream: a stream spec that cannot be registered.
	ErrInvalidStream = errors.New("invalid stream")
	// ErrAuth: the auth frame was refused.
	ErrAuth = errors.New("auth failed")
	// ErrForbidden: the principal may not do this operation.
	ErrForbidden = errors.New("forbidden")
	// ErrOverloaded: an acked publish could not be admitted in time.
	ErrOverloaded = errors.New("ingress overloaded")
	// ErrDraining: the broker is shutting down and takes no new work.
	ErrDraining = errors.New("broker draining")
	// ErrInvalidRequest: a roster or consumer-group request with a field outside its
	// domain (an empty name, an oversize member, a zero max_inflight, ...).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrNotNegotiated: a request of an optional protocol feature on a
	// stream whose client did not advertise its capability bit.
	ErrNotNegotiated = errors.New("capability not negotiated")
	// ErrLimitExceeded: a request over one of the broker's per-connection
	// or broker-wide limits; retrying it unchanged fails again. Its
	// message leads with the typed code limit_exceeded.
	ErrLimitExceeded = errors.New("limit_exceeded")
	// ErrInvalidConfig: a Config that cannot run.
	ErrInvalidConfig = errors.New("broker: invalid config")
)

// notFound builds the published Felix's message for an unknown stream.
func notFound(k StreamKey) error {
	return fmt.Errorf("%w: tenant=%s namespace=%s stream=%s", ErrStreamNotFound, k.Tenant, k.Namespace, k.Stream)
}

// CursorError answers a subscribe whose start offset is outside what the
// shard holds.
type CursorError struct {
	Reason    string // "too_old" or "in_future"
	Requested uint64
	Available uint64
}

func (e *CursorError) Error() string {
	return fmt.Sprintf("subscribe cursor %s: requested %d, available %d", e.Reason, e.Requested, e.Available)
}
