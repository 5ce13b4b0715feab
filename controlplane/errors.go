package controlplane

import (
	"errors"
	"fmt"
)

// Store errors. Backends return these (possibly wrapped with the resource
// name); the server maps each to an HTTP status.
var (
	ErrNotFound       = errors.New("controlplane: not found")
	ErrExists         = errors.New("controlplane: already exists")
	ErrParentNotFound = errors.New("controlplane: parent not found")
	ErrNotEmpty       = errors.New("controlplane: not empty")
	ErrResync         = errors.New("controlplane: resync required")
	ErrClosed         = errors.New("controlplane: store closed")
	ErrInvalid        = errors.New("controlplane: invalid request")
	// ErrUnavailable wraps failures to reach the backing store (etcd down,
	// no leader); the request may succeed when retried.
	ErrUnavailable = errors.New("controlplane: store unavailable")
	// ErrConflict is a lost compare-and-swap (the stored placement): another
	// writer changed it first; re-read and retry.
	ErrConflict = errors.New("controlplane: concurrent update")
	// ErrMoving refuses a move of a replicated shard whose group has not
	// caught up with its previous move yet (409, code "moving").
	ErrMoving = errors.New("controlplane: shard is moving")
)

// RefError is a store error about one resource; Is matches Err, one of the
// sentinels above. Its message is written for API clients.
type RefError struct {
	Err    error
	Ref    Ref
	Detail string // optional, e.g. what the resource still holds
}

func refErr(err error, ref Ref) error { return &RefError{Err: err, Ref: ref} }

func (e *RefError) Error() string {
	var what string
	switch e.Err {
	case ErrNotFound:
		what = "not found"
	case ErrExists:
		what = "already exists"
	case ErrParentNotFound:
		what = "not found: create it first"
	case ErrNotEmpty:
		what = "is not empty: delete what it holds first"
	default:
		what = e.Err.Error()
	}
	msg := string(e.Ref.Kind) + " " + e.Ref.Path + " " + what
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Is makes a RefError match its sentinel.
func (e *RefError) Is(target error) bool { return target == e.Err }

// Authorization errors. An Authorizer returns an error matching one of these
// (an *AuthError does); anything else is treated as an internal failure and
// the request is refused.
var (
	ErrUnauthenticated = errors.New("controlplane: unauthenticated")
	ErrForbidden       = errors.New("controlplane: forbidden")
)

// ResyncError says that a changes cursor cannot be served: the changes after
// it are no longer retained (compacted), or the cursor is ahead of the store
// (the store was replaced or wiped). The reader must take a new snapshot.
type ResyncError struct {
	Cursor   int64 // the cursor asked for
	Oldest   int64 // changes after this revision are retained; 0 if unknown
	Revision int64 // the store's current revision, where a new snapshot stands
	Ahead    bool  // the cursor is newer than the store
}

func (e *ResyncError) Error() string {
	if e.Ahead {
		return fmt.Sprintf("cursor %d is ahead of the store (current revision %d): the store was replaced; take a new snapshot", e.Cursor, e.Revision)
	}
	return fmt.Sprintf("cursor %d is older than the retained history (changes after revision %d are kept); take a new snapshot (current revision %d)",
		e.Cursor, e.Oldest, e.Revision)
}

// Is makes a ResyncError match ErrResync.
func (e *ResyncError) Is(target error) bool { return target == ErrResync }

// AuthError is a refused request: Kind is ErrUnauthenticated (401: no or bad
// credentials) or ErrForbidden (403: valid credentials, missing permission).
type AuthError struct {
	Kind   error
	Reason string
}

func (e *AuthError) Error() string { return e.Reason }

// Is makes an AuthError match its Kind.
func (e *AuthError) Is(target error) bool { return target == e.Kind }

// Unauthenticated returns an *AuthError of kind ErrUnauthenticated.
func Unauthenticated(format string, args ...any) error {
	return &AuthError{Kind: ErrUnauthenticated, Reason: fmt.Sprintf(format, args...)}
}

// Forbidden returns an *AuthError of kind ErrForbidden.
func Forbidden(format string, args ...any) error {
	return &AuthError{Kind: ErrForbidden, Reason: fmt.Sprintf(format, args...)}
}

// invalid returns an error matching ErrInvalid with a message for the client.
func invalid(format string, args ...any) error { return apiErr(ErrInvalid, format, args...) }

// apiErr returns an error matching kind whose message is written for API
// clients (no package prefix).
func apiErr(kind error, format string, args ...any) error {
	return &apiError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

type apiError struct {
	kind error
	msg  string
}

func (e *apiError) Error() string        { return e.msg }
func (e *apiError) Is(target error) bool { return target == e.kind }
