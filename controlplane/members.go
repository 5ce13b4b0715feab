package controlplane

import (
	"context"
	"time"

	"github.com/felixmq/felix/cluster"
)

// MemberStore is the cluster part of a store: brokers' membership under
// leases and the one stored placement. Both built-in stores implement it.
//
// Contract (the API tests run it against each backend):
//   - Register puts m under a new lease of ttl (re-registering replaces
//     the member and its lease) and returns the TTL granted (etcd rounds
//     up to whole seconds and to its minimum).
//   - KeepAlive renews id's lease for its TTL; ErrNotFound once it has
//     lapsed or the member left. A non-nil load replaces the member's
//     load report (nil keeps it); Loads returns the last reports, by
//     member ID. A report outlives its member (the recompute after a
//     leave deals the departed member's shards by their last rates) and,
//     unlike every other change, does not wake Notify: load alone never
//     triggers a recompute.
//   - ReportReplicas replaces id's replica report (ErrNotFound unless id
//     is a member); ReplicaReports returns the last reports, by member ID.
//     Like a load report it outlives its member. Unlike one, it wakes
//     Notify, since it changes the placement, but only when it differs
//     from the stored report: the same report every keepalive wakes
//     nobody.
//   - A member whose lease lapses disappears from Members by itself,
//     without any request: etcd deletes its key, the memory store runs a
//     timer. Leave removes it at once (ErrNotFound if absent).
//   - Placement returns the stored placement, Version = the revision that
//     wrote it, or a zero Placement if none was stored. SwapPlacement
//     stores p only if the stored version is still prev (0: none stored)
//     and returns the new version; otherwise ErrConflict.
//   - Notify returns a channel closed at the next change to anything the
//     store holds (resources, members, placement, a lapsed lease). Take it
//     before reading, so that no change falls between read and wait.
type MemberStore interface {
	Register(ctx context.Context, m cluster.Member, ttl time.Duration) (time.Duration, error)
	KeepAlive(ctx context.Context, id string, load []cluster.ShardLoad) (time.Duration, error)
	Loads(ctx context.Context) (map[string][]cluster.ShardLoad, error)
	ReportReplicas(ctx context.Context, id string, reports []cluster.ReplicaReport) error
	ReplicaReports(ctx context.Context) (map[string][]cluster.ReplicaReport, error)
	Leave(ctx context.Context, id string) error
	Members(ctx context.Context) ([]cluster.Member, error)
	Placement(ctx context.Context) (cluster.Placement, error)
	SwapPlacement(ctx context.Context, prev int64, p cluster.Placement) (int64, error)
	Notify(ctx context.Context) (<-chan struct{}, error)
}

// memberErr is the API's error for an unknown member.
func memberErr(id string) error {
	return apiErr(ErrNotFound, "member %q is not registered (its lease lapsed or it left): register again", id)
}
