package api

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrorBody is the body of every error answer of the control plane.
type ErrorBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	// Revision is set with code "resync": the store's current revision.
	Revision int64 `json:"revision,omitempty"`
}

// Errors a Client's refusals match (an *Error does, by its status), and
// configuration mistakes.
var (
	// ErrNotFound matches a 404: the resource does not exist; for a
	// keepalive, the member's lease has lapsed.
	ErrNotFound = errors.New("controlplane/api: not found")
	// ErrUnauthorized matches a 401 or 403: the credential is wrong or
	// lacks the permission; retrying will not help.
	ErrUnauthorized = errors.New("controlplane/api: unauthorized")
	// ErrConflict matches a 409: the resource exists already, or still
	// holds others.
	ErrConflict = errors.New("controlplane/api: conflict")
	// ErrResync matches a 410: the changes feed no longer holds the
	// cursor; read a new snapshot.
	ErrResync = errors.New("controlplane/api: resync")
	// ErrInvalid is a configuration mistake on the client's side.
	ErrInvalid = errors.New("controlplane/api: invalid configuration")
)

// Error is a refusal by the control plane: its status and error body.
type Error struct {
	Status int
	ErrorBody
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("control plane: %d %s: %s", e.Status, e.Code, e.Message)
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return msg
}

// Is maps the status onto the sentinels above.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrResync:
		return e.Status == http.StatusGone
	}
	return false
}
