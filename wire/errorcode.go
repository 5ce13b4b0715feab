package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrorCode is a typed error code (the published Felix's 15 codes). It
// travels as a u16 in binary acks (FlagAckCode) and as its name in JSON
// ("code"), only to peers that negotiated it. 0 is never sent: it is what
// an unknown code decodes to.
type ErrorCode uint16

const (
	CodeUnknown          ErrorCode = 0
	CodeUnauthenticated  ErrorCode = 1
	CodeForbidden        ErrorCode = 2
	CodeNotFound         ErrorCode = 3
	CodeInvalidRequest   ErrorCode = 4
	CodeShardUnavailable ErrorCode = 5
	CodeNotLeader        ErrorCode = 6
	CodeQuorumTimeout    ErrorCode = 7
	CodeLeadershipLost   ErrorCode = 8
	CodeUnacknowledged   ErrorCode = 9
	CodeOverloaded       ErrorCode = 10
	CodeLimitExceeded    ErrorCode = 11
	CodeDraining         ErrorCode = 12
	CodeInternal         ErrorCode = 13
	CodeStorage          ErrorCode = 14
	CodeStaleClaim       ErrorCode = 15
	numCodes                       = 16
)

// RetryClass tells a client what to do about an error. The numeric values
// are the binary ack's retry byte.
type RetryClass uint8

const (
	// RetryUnknown is never sent; it decodes as Fatal.
	RetryUnknown RetryClass = 0
	// Retry: the request was not applied; send it again.
	Retry RetryClass = 1
	// RetryAfter: the request was not applied; send it again later
	// (detail.retry_after_ms when said).
	RetryAfter RetryClass = 2
	// Redirect: the request belongs on another broker (not_leader).
	Redirect RetryClass = 3
	// OutcomeUnknown: the request may or may not have been applied; only
	// an idempotent re-send is safe.
	OutcomeUnknown RetryClass = 4
	// Fatal: sending it again will fail the same way.
	Fatal RetryClass = 5

	numRetryClasses = 6
)

var codeNames = [numCodes]string{
	"unknown", "unauthenticated", "forbidden", "not_found", "invalid_request", "shard_unavailable",
	"not_leader", "quorum_timeout", "leadership_lost", "unacknowledged", "overloaded",
	"limit_exceeded", "draining", "internal", "storage", "stale_claim",
}

var defaultRetry = [numCodes]RetryClass{
	Fatal, Fatal, Fatal, RetryAfter, Fatal, Retry,
	Redirect, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, RetryAfter,
	Fatal, Retry, OutcomeUnknown, OutcomeUnknown, Retry,
}

var retryNames = [numRetryClasses]string{"unknown", "retry", "retry_after", "redirect", "outcome_unknown", "fatal"}

// String is the JSON name ("not_found"); codes outside the table are
// "unknown".
func (c ErrorCode) String() string {
	if c < numCodes {
		return codeNames[c]
	}
	return "unknown"
}

// DefaultRetry is the code's retry class when the sender says nothing else.
func (c ErrorCode) DefaultRetry() RetryClass {
	if c < numCodes {
		return defaultRetry[c]
	}
	return Fatal
}

// ParseErrorCode maps a JSON name to its code; an unknown name is
// CodeUnknown and false.
func ParseErrorCode(s string) (ErrorCode, bool) {
	for i := 1; i < numCodes; i++ {
		if codeNames[i] == s {
			return ErrorCode(i), true
		}
	}
	return CodeUnknown, false
}

func (r RetryClass) String() string {
	if r < numRetryClasses {
		return retryNames[r]
	}
	return fmt.Sprintf("retry_class(%d)", uint8(r))
}

// ParseRetryClass maps a JSON name to its class; anything unknown reads as
// Fatal, as the published client reads it.
func ParseRetryClass(s string) RetryClass {
	for i := 1; i < int(numRetryClasses); i++ {
		if retryNames[i] == s {
			return RetryClass(i)
		}
	}
	return Fatal
}

// retryByte decodes the binary retry byte: an unknown value is Fatal.
func retryByte(b byte) RetryClass {
	if b == 0 || b >= byte(numRetryClasses) {
		return Fatal
	}
	return RetryClass(b)
}

// TypedError is the code, retry class and optional detail an error answer
// carries for a peer that negotiated typed errors. Reason "" and
// RetryAfterMs 0 mean "not said".
type TypedError struct {
	Code         ErrorCode
	Retry        RetryClass
	Reason       string
	RetryAfterMs uint64
}

// NewTypedError is code with its default retry class.
func NewTypedError(code ErrorCode) *TypedError {
	return &TypedError{Code: code, Retry: code.DefaultRetry()}
}

// hasDetail reports whether the detail block (FlagAckDetail, "detail")
// carries anything.
func (e *TypedError) hasDetail() bool { return e.Reason != "" || e.RetryAfterMs != 0 }

func (e *TypedError) check() error {
	if len(e.Reason) > math.MaxUint16 {
		return &LengthError{Field: "reason", Len: len(e.Reason), Max: math.MaxUint16, Err: ErrMessageTooLong}
	}
	if !utf8.ValidString(e.Reason) {
		return &InvalidUTF8Error{Field: "reason"}
	}
	return nil
}

// appendJSON writes `,"code":..,"retry":..[,"detail":{..}]`, nothing for
// nil.
func (e *TypedError) appendJSON(dst []byte) []byte {
	if e == nil {
		return dst
	}
	dst = appendStrField(dst, `,"code":`, e.Code.String())
	dst = appendStrField(dst, `,"retry":`, e.Retry.String())
	if !e.hasDetail() {
		return dst
	}
	dst = append(dst, `,"detail":{`...)
	sep := ""
	if e.Reason != "" {
		dst = appendStrField(dst, `"reason":`, e.Reason)
		sep = ","
	}
	if e.RetryAfterMs != 0 {
		dst = appendUintField(dst, sep+`"retry_after_ms":`, e.RetryAfterMs)
	}
	return append(dst, '}')
}

// appendCode writes the FlagAckCode block, then the FlagAckDetail block
// when detail is set.
func (e *TypedError) appendBinary(dst []byte, detail bool) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Code))
	dst = append(dst, byte(e.Retry))
	if detail {
		dst = appendName(dst, e.Reason)
		dst = binary.BigEndian.AppendUint64(dst, e.RetryAfterMs)
	}
	return dst
}

func (e *TypedError) decodeBinary(r *reader, detail bool) error {
	c, err := r.u16("code")
	if err != nil {
		return err
	}
	b, err := r.u8("retry")
	if err != nil {
		return err
	}
	e.Code, e.Retry = ErrorCode(c), retryByte(b)
	if e.Code >= numCodes {
		e.Code = CodeUnknown
	}
	if !detail {
		return nil
	}
	if err := r.str("reason", &e.Reason); err != nil {
		return err
	}
	e.RetryAfterMs, err = r.u64("retry_after_ms")
	return err
}
