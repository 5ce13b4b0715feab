package linux

import "errors"

// ErrNotSupported is wrapped by every error that means "this platform,
// kernel or file system cannot do that": the caller should take its portable
// path instead.
var ErrNotSupported = errors.New("linux: not supported")
