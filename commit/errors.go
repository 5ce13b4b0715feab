package commit

import "errors"

var (
	// ErrSyncFailed is wrapped by every error that reports a failed Sync. A
	// failed sync is terminal: the error also wraps the Syncer's cause, every
	// pending and later reservation completes with it, and Flush, Close and
	// Err return it.
	ErrSyncFailed = errors.New("commit: sync failed")

	// ErrClosed is returned by Reserve and Flush once Close has begun.
	ErrClosed = errors.New("commit: sequencer closed")

	// ErrInvalidConfig is wrapped by New when a Config field is out of
	// range; the message names the field.
	ErrInvalidConfig = errors.New("commit: invalid config")

	// ErrUnknownMode is returned by ParseMode for a name that is not one of
	// "on_commit", "periodic" or "never".
	ErrUnknownMode = errors.New("commit: unknown fsync mode")
)
