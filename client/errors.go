package client

import (
	"errors"
	"fmt"
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
)

// BrokerError is an error the broker reported for a request.
type BrokerError struct {
	Message string
}

func (e *BrokerError) Error() string { return "broker: " + e.Message }

// CursorError is the broker's refusal of a subscribe start offset.
type CursorError struct {
	Reason    string // too_old or in_future
	Requested uint64
	Available uint64
}

func (e *CursorError) Error() string {
	return fmt.Sprintf("broker: subscribe cursor %s: requested %d, available %d", e.Reason, e.Requested, e.Available)
}
