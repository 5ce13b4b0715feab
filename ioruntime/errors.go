package ioruntime

import (
	"errors"

	"github.com/felixmq/felix/internal/linux"
)

var (
	// ErrNotSupported wraps every "this platform cannot do that" error
	// (CPU affinity off Linux).
	ErrNotSupported = linux.ErrNotSupported

	// ErrClosed is returned by Go after Close.
	ErrClosed = errors.New("ioruntime: closed")

	// ErrInvalidConfig wraps configuration errors.
	ErrInvalidConfig = errors.New("ioruntime: invalid config")
)
