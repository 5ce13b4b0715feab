package controlplane

import (
	"context"
	"encoding/json"
)

// Store keeps the resources and the revisioned history of their changes.
//
// Contract shared by every backend (the API test suite runs against each):
//   - Every successful Create or Delete is one change with its own revision,
//     greater than every revision before it. Revisions need not be
//     contiguous (etcd's are shared with other keys).
//   - Create fails with ErrExists if the resource exists and with
//     ErrParentNotFound if its parent does not; Delete fails with
//     ErrNotFound, or ErrNotEmpty while the resource has children. Both
//     checks and the write are one atomic step.
//   - Changes returns the changes with revision > after, in revision order,
//     at most limit of them; it never leaves a gap. A cursor whose
//     following changes are no longer retained, or that is ahead of the
//     store, fails with a *ResyncError.
//   - Wait returns once a change with revision > after exists, or with the
//     context's error.
//
// Values are the JSON encoding of the resource; stores keep them opaque.
type Store interface {
	Create(ctx context.Context, ref Ref, value []byte) (revision int64, err error)
	Get(ctx context.Context, ref Ref) (Item, error)
	// List returns the resources of kind inside parent (see ListPrefix),
	// ordered by path, and the revision the list was read at.
	List(ctx context.Context, kind Kind, parent string) ([]Item, int64, error)
	Delete(ctx context.Context, ref Ref) (revision int64, err error)
	// Snapshot returns every resource, ordered by store key, as of the
	// returned revision: following the feed from that revision misses
	// nothing and repeats nothing.
	Snapshot(ctx context.Context) (revision int64, items []Item, err error)
	Changes(ctx context.Context, after int64, limit int) (Page, error)
	Wait(ctx context.Context, after int64) error
	Close() error
}

// Item is a stored resource.
type Item struct {
	Ref
	Revision int64           // the revision that created it
	Value    json.RawMessage // the resource as JSON
}

// Page is one read of the changes feed.
type Page struct {
	Changes []Change
	// Truncated says more changes followed the last one returned.
	Truncated bool
	// Revision is the store's revision when the page was read (the newest
	// change it knew of); a reader that got an untruncated page is in sync
	// up to it.
	Revision int64
}
