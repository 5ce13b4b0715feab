package cluster

import (
	"errors"
	"fmt"
	"net/http"
)

// Errors of the clients (Agent, Watcher).
var (
	// ErrNotFound matches a 404: for a keepalive, the lease has lapsed.
	ErrNotFound = errors.New("cluster: not found")
	// ErrUnauthorized matches a 401 or 403: the credential is wrong or
	// lacks the permission; retrying will not help.
	ErrUnauthorized = errors.New("cluster: unauthorized")
	// ErrInvalid is a configuration mistake.
	ErrInvalid = errors.New("cluster: invalid configuration")
	// ErrOwnerUnavailable: a shard's owner is not live (a durable shard
	// waits for its owner, whose disk holds its data) or could not be
	// reached. The publish was not acked and not applied anywhere else.
	// Its text is the wire error code that leads the broker's refusal, so
	// it carries no package prefix.
	ErrOwnerUnavailable = errors.New("owner_unavailable")
)

// APIError is a control plane's error answer (its JSON error body).
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("cluster: control plane answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Is maps the status onto ErrNotFound and ErrUnauthorized.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	}
	return false
}
