package cpuprofile

import "errors"

var (
	// ErrNotSupported is wrapped by every error that means "this platform,
	// kernel or privilege level cannot do that": the /proc readers on a
	// system without /proc, and the eBPF probes without root, BPF or
	// tracefs. The message carries the cause; the caller degrades (to /proc
	// for the probes) rather than fails.
	ErrNotSupported = errors.New("cpuprofile: not supported")
	// ErrMalformed is wrapped when a /proc file does not have the layout
	// proc(5) documents.
	ErrMalformed = errors.New("cpuprofile: malformed /proc record")
	// ErrClosed is returned by reads from closed Probes.
	ErrClosed = errors.New("cpuprofile: probes closed")
)
