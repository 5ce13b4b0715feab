package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/felixmq/felix/wire"
)

var (
	// ErrClosed: the client, publisher or subscription was closed.
	ErrClosed = errors.New("client: closed")
	// ErrProtocol: the broker sent something the protocol does not allow here.
	ErrProtocol = errors.New("client: protocol error")
	// ErrAuth: the broker refused the stream's auth frame.
	ErrAuth = errors.New("client: auth refused")
	// ErrPathStalled: the connection this publisher or subscription ran on
	// was closed because its path stalled (an MTU black hole, say); the
	// Client has redialled, so open a new one (resuming by offset).
	ErrPathStalled = errors.New("client: connection path stalled; redialled")
	// ErrInvalidConfig: a Config that cannot be used.
	ErrInvalidConfig = errors.New("client: invalid config")
	// ErrNotOwner matches a BrokerError refusing a request for a shard
	// another broker owns (its Owner says which, when negotiated).
	ErrNotOwner = errors.New("client: not_owner")
	// ErrOwnerUnavailable matches a BrokerError for a shard whose owner is
	// down: the publish was not applied; retry it later.
	ErrOwnerUnavailable = errors.New("client: owner_unavailable")
	// ErrNotNegotiated: the broker did not advertise what the call needs.
	ErrNotNegotiated = errors.New("client: capability not negotiated with the broker")
	// ErrLimitExceeded matches a BrokerError refusing a request over one of
	// the broker's limits (subscriptions per connection, a frame over the
	// frame budget, a connection limit): retrying it unchanged fails again.
	ErrLimitExceeded = errors.New("client: limit_exceeded")
	// ErrStorage matches a *StorageError.
	ErrStorage = errors.New("client: storage")
)

// StorageError ends a subscription whose replay reached a record the
// broker cannot read (its durable log is damaged there): every record
// before Offset was delivered, none from it on.
type StorageError struct {
	Offset  uint64
	Message string
}

func (e *StorageError) Error() string { return "broker: " + e.Message }

// Is makes errors.Is(err, ErrStorage) true.
func (e *StorageError) Is(target error) bool { return target == ErrStorage }

// eventStreamError is the error an event stream's error frame carries: a
// *StorageError when it leads with the storage code and an offset, else a
// *BrokerError.
func eventStreamError(msg string) error {
	var off uint64
	if _, err := fmt.Sscanf(msg, "storage: offset %d", &off); err == nil {
		return &StorageError{Offset: off, Message: msg}
	}
	return &BrokerError{Message: msg}
}

// BrokerError is an error the broker reported for a request.
type BrokerError struct {
	Message string
	// Owner names the shard's owner on cluster refusals (not_owner,
	// owner_unavailable) from a broker that negotiated wire.CapOwner.
	Owner *wire.Owner
}

func (e *BrokerError) Error() string { return "broker: " + e.Message }

// Is maps the broker's error codes, which lead the message ("not_owner:
// ...", "owner_unavailable: ...", "limit_exceeded: ..."), to ErrNotOwner,
// ErrOwnerUnavailable and ErrLimitExceeded.
func (e *BrokerError) Is(target error) bool {
	switch target {
	case ErrNotOwner:
		return strings.HasPrefix(e.Message, "not_owner")
	case ErrOwnerUnavailable:
		return strings.HasPrefix(e.Message, "owner_unavailable")
	case ErrLimitExceeded:
		return strings.HasPrefix(e.Message, "limit_exceeded")
	}
	return false
}

// CursorError is the broker's refusal of a subscribe start offset.
type CursorError struct {
	Reason    string // too_old or in_future
	Requested uint64
	Available uint64
}

func (e *CursorError) Error() string {
	return fmt.Sprintf("broker: subscribe cursor %s: requested %d, available %d", e.Reason, e.Requested, e.Available)
}
