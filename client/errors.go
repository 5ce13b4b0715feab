package client

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	// ErrSlowConsumer: the broker ended the subscription because its queue,
	// under the block policy, held publishers up longer than the broker
	// allows (FELIX_SUBSCRIBER_BLOCK_TIMEOUT_MS).
	ErrSlowConsumer = errors.New("client: subscription cut as a slow consumer")
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
	// ErrNotFound matches a refusal naming something that does not exist
	// (a stream, a cache): BrokerError code not_found, CacheError
	// cache_not_found.
	ErrNotFound = errors.New("client: not_found")
	// ErrForbidden matches a refusal because the token does not grant the
	// request (code forbidden).
	ErrForbidden = errors.New("client: forbidden")
	// ErrInvalidRequest matches a refusal of a request that is wrong as
	// asked (a shard out of range, a queue on an ephemeral stream, a
	// non-counter value added to): code invalid_request.
	ErrInvalidRequest = errors.New("client: invalid_request")
)

// codeErrors are the sentinels a typed code matches.
var codeErrors = map[error]wire.ErrorCode{
	ErrNotOwner:         wire.CodeNotLeader,
	ErrOwnerUnavailable: wire.CodeShardUnavailable,
	ErrLimitExceeded:    wire.CodeLimitExceeded,
	ErrNotFound:         wire.CodeNotFound,
	ErrForbidden:        wire.CodeForbidden,
	ErrInvalidRequest:   wire.CodeInvalidRequest,
}

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
// *StorageError when it names the offset a damaged log stops at
// ("storage: offset N ..."), else a *BrokerError.
func eventStreamError(msg string, typed *wire.TypedError) error {
	var off uint64
	if _, err := fmt.Sscanf(msg, "storage: offset %d", &off); err == nil {
		return &StorageError{Offset: off, Message: msg}
	}
	return brokerError(msg, typed, nil)
}

// BrokerError is an error the broker reported for a request. Its code and
// retry class come from the broker (typed errors are negotiated on every
// stream: wire.FeatureErrorCodes, and wire.FlagAckCode on binary acks);
// a broker that sent none gives wire.CodeUnknown, which reads as fatal.
type BrokerError struct {
	Message string
	// Err is the typed error the broker sent, nil for none.
	Err *wire.TypedError
	// Owner names the shard's owner on cluster refusals (not_owner,
	// owner_unavailable) from a broker that negotiated wire.CapOwner.
	Owner *wire.Owner
}

func (e *BrokerError) Error() string { return "broker: " + e.Message }

// Code is the broker's error code (wire.CodeUnknown when it sent none).
func (e *BrokerError) Code() wire.ErrorCode {
	if e.Err == nil {
		return wire.CodeUnknown
	}
	return e.Err.Code
}

// Retry is what the broker says may be done about the error; a broker that
// gave no class gives wire.Fatal.
func (e *BrokerError) Retry() wire.RetryClass {
	if e.Err == nil {
		return wire.Fatal
	}
	return e.Err.Retry
}

// RetryAfter is how long the broker asked to wait before retrying, 0 when
// it did not say.
func (e *BrokerError) RetryAfter() time.Duration {
	if e.Err == nil {
		return 0
	}
	return time.Duration(e.Err.RetryAfterMs) * time.Millisecond
}

// Is maps the broker's codes to ErrNotOwner (not_leader: the shard is
// another broker's), ErrOwnerUnavailable (shard_unavailable),
// ErrLimitExceeded (limit_exceeded), ErrNotFound, ErrForbidden and
// ErrInvalidRequest, so callers tell refusals apart with errors.Is.
func (e *BrokerError) Is(target error) bool {
	code, ok := codeErrors[target]
	return ok && e.Code() == code
}

// brokerError is the BrokerError of an error answer's fields.
func brokerError(msg string, typed *wire.TypedError, owner *wire.Owner) *BrokerError {
	return &BrokerError{Message: msg, Err: typed, Owner: owner}
}

// RetryOf says what may be done about an error a call returned: the
// broker's retry class for a *BrokerError, *CacheError or *RefusedError;
// wire.Fatal for an error of this package's own making (ErrClosed,
// ErrInvalidConfig, ErrNotNegotiated, ErrProtocol, ErrAuth) or of the
// caller's context; wire.OutcomeUnknown for anything else, which is the
// connection failing under the call: a publish may or may not have landed.
func RetryOf(err error) wire.RetryClass {
	var be *BrokerError
	var ce *CacheError
	var re *RefusedError
	switch {
	case err == nil:
		return wire.RetryUnknown
	case errors.As(err, &be):
		return be.Retry()
	case errors.As(err, &ce):
		return ce.Typed().Retry
	case errors.As(err, &re):
		return re.Retry()
	case errors.Is(err, ErrClosed), errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrNotNegotiated),
		errors.Is(err, ErrProtocol), errors.Is(err, ErrAuth),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return wire.Fatal
	}
	return wire.OutcomeUnknown
}

// RefusedError is an idempotent batch the broker refused without writing
// it (publish_refused).
type RefusedError struct {
	Reason  wire.Refusal
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("broker: publish refused (%s): %s", e.Reason.Kind, e.Message)
}

// Retry is Redirect for not_leader (the batch belongs on the broker the
// refusal names), Fatal for the others: re-sending the same sequence fails
// the same way.
func (e *RefusedError) Retry() wire.RetryClass {
	if e.Reason.Kind == wire.RefusedNotLeader {
		return wire.Redirect
	}
	return wire.Fatal
}

// Is maps not_leader to ErrNotOwner.
func (e *RefusedError) Is(target error) bool {
	return target == ErrNotOwner && e.Reason.Kind == wire.RefusedNotLeader
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
