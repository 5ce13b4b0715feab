package broker

import (
	"errors"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// Typed errors. Every refusal the broker sends maps to one of the published
// Felix's 15 codes (wire/errorcode.go) and a retry class, which clients that
// negotiated them (wire.FeatureErrorCodes, or wire.FlagAckCode on binary
// acks) get beside the message. The message itself is unchanged: the code
// is derived from the error value (its sentinel, or a coded wrapper), never
// from the text.

// ErrUnacknowledged: a publish whose outcome is unknown (cluster's).
var ErrUnacknowledged = cluster.ErrUnacknowledged

// codedError gives err a code (and a detail reason) of its own; its
// message is err's.
type codedError struct {
	code   wire.ErrorCode
	reason string
	err    error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// withCode wraps err with code and reason.
func withCode(code wire.ErrorCode, reason string, err error) error {
	return &codedError{code: code, reason: reason, err: err}
}

// refusal is a refusal whose message has no error value behind it.
func refusal(code wire.ErrorCode, msg string) error {
	return &codedError{code: code, err: errors.New(msg)}
}

// sentinelCodes map the broker's error categories to codes; the first
// match wins, so more specific categories come first.
var sentinelCodes = []struct {
	err    error
	code   wire.ErrorCode
	reason string
}{
	{ErrAuth, wire.CodeUnauthenticated, ""},
	{ErrForbidden, wire.CodeForbidden, ""},
	{ErrStreamNotFound, wire.CodeNotFound, ""},
	{ErrCacheNotFound, wire.CodeNotFound, ""},
	{ErrNotOwner, wire.CodeNotLeader, ""},
	{ErrLeadershipLost, wire.CodeLeadershipLost, ""},
	{ErrQuorumTimeout, wire.CodeQuorumTimeout, ""},
	{ErrUnacknowledged, wire.CodeUnacknowledged, ""},
	{ErrOwnerUnavailable, wire.CodeShardUnavailable, "owner_unavailable"},
	{ErrOverloaded, wire.CodeOverloaded, "publish_queue_full"},
	{ErrTenantQuota, wire.CodeOverloaded, "tenant_quota"},
	{segment.ErrNoSpace, wire.CodeOverloaded, "no_space"},
	{ErrDraining, wire.CodeDraining, ""},
	{segment.ErrRecordTooLarge, wire.CodeLimitExceeded, ""},
	{ErrLimitExceeded, wire.CodeLimitExceeded, ""},
	{ErrInvalidRequest, wire.CodeInvalidRequest, ""},
	{ErrNotNegotiated, wire.CodeInvalidRequest, ""},
	{ErrInvalidStream, wire.CodeInvalidRequest, ""},
	{ErrStorage, wire.CodeStorage, ""},
	{segment.ErrLogFailed, wire.CodeStorage, ""},
	{commit.ErrSyncFailed, wire.CodeStorage, ""},
	{segment.ErrCorrupt, wire.CodeStorage, ""},
	{segment.ErrClosed, wire.CodeDraining, ""},
	{commit.ErrClosed, wire.CodeDraining, ""},
}

// wireErrors are the decode failures of a request: invalid_request.
var wireErrors = []error{
	wire.ErrTruncated, wire.ErrCountTooLarge, wire.ErrTrailingBytes, wire.ErrInvalidUTF8,
	wire.ErrBadAckMode, wire.ErrMissingField, wire.ErrMalformedJSON, wire.ErrUnknownMessageType,
	wire.ErrUnknownFlags, wire.ErrInvalidFlags, wire.ErrNameTooLong,
}

// typedCarrier is an error that brings its typed error along: an owner's
// answer a forwarder relays.
type typedCarrier interface{ TypedError() *wire.TypedError }

// typedError is err's code, retry class and detail. An error the broker
// does not know is internal, whose outcome is unknown.
func typedError(err error) *wire.TypedError {
	var tc typedCarrier
	if errors.As(err, &tc) && tc.TypedError() != nil {
		t := *tc.TypedError()
		return &t
	}
	var ce *codedError
	if errors.As(err, &ce) {
		e := wire.NewTypedError(ce.code)
		e.Reason = ce.reason
		return e
	}
	var cache *cacheError
	if errors.As(err, &cache) {
		return cache.code.Typed()
	}
	for _, s := range sentinelCodes {
		if errors.Is(err, s.err) {
			e := wire.NewTypedError(s.code)
			e.Reason = s.reason
			return e
		}
	}
	for _, w := range wireErrors {
		if errors.Is(err, w) {
			return wire.NewTypedError(wire.CodeInvalidRequest)
		}
	}
	return wire.NewTypedError(wire.CodeInternal)
}
