// Package cluster holds what several brokers share about each other: the
// live members and which member owns each shard (the placement), the pure
// function that computes a placement (Place) and its index for lookups per
// publish (Index). The control plane computes and stores the placement;
// brokers and ClusterClient read it. It does no I/O: the HTTP bodies of
// membership and placement, and the clients that register a broker and
// follow the placement (Agent, Watcher), are in controlplane/api.
//
// Placement rules: every shard of every stream is assigned to one member;
// balanced by shard count (max-min <= 1 over live members when nothing
// pins), then by the members' reported load where counts leave a choice,
// stable across restarts and minimal movement when a member joins or
// leaves (load never moves a shard by itself). A durable shard stays with
// its owner while that owner is absent (its data is on that broker's
// disk): publishes to it fail with "owner unavailable" until it returns.
// A replicated shard (ShardSpec.Replicas > 1) is assigned a replica set
// instead: that many distinct members, spread across zones, balanced by the
// shard copies each member holds, its first member (the preferred leader)
// chosen so that preferred leaderships balance; once chosen, the set stays
// as it is, absent members included, until the placer replaces a member
// absent for too long or moves a replica to balance the copies (Rules).
// The set is the target: the shard's raft group, which the placement also
// shows as its leader reports it (Voters, Learners, InSync), follows it
// one membership change at a time.
package cluster

import (
	"fmt"
	"slices"
	"time"
)

// Member is one broker of the cluster.
type Member struct {
	ID        string `json:"id"`
	QUICAddr  string `json:"quic_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
	// Zone is the failure domain the broker runs in (a rack, an
	// availability zone); a replicated shard's replicas spread across
	// zones. Empty: none given (all such members count as one zone).
	Zone string `json:"zone,omitempty"`
	// Live is false for an owner of durable shards whose lease lapsed.
	Live bool `json:"live"`
	// DownSince is when the placer first found the member absent (its
	// lease lapsed or it left); zero while it is live. A replicated
	// shard's member absent for longer than Rules.ReplaceAfter is
	// replaced.
	DownSince time.Time `json:"down_since,omitzero"`
}

// Equal reports whether m and o are the same member alike (DownSince
// compared as instants).
func (m Member) Equal(o Member) bool {
	return m.ID == o.ID && m.QUICAddr == o.QUICAddr && m.AdminAddr == o.AdminAddr && m.Zone == o.Zone &&
		m.Live == o.Live && m.DownSince.Equal(o.DownSince)
}

// Shard names one shard of one stream.
type Shard struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Shard     int    `json:"shard"`
}

func (s Shard) String() string {
	return fmt.Sprintf("%s/%s/%s#%d", s.Tenant, s.Namespace, s.Stream, s.Shard)
}

// ShardLoad is one owned shard's observed publish rate, as its owner
// reports it with each keepalive.
type ShardLoad struct {
	Shard
	BytesPerSec int64 `json:"bytes_per_s"`
}

// Assignment gives one shard its owner (a Member.ID) and, for a
// replicated shard, its replicas.
type Assignment struct {
	Shard
	// Owner is the member that serves the shard; for a replicated shard,
	// Replicas[0] (readers that know no replication route to it).
	Owner   string `json:"owner"`
	Durable bool   `json:"durable,omitempty"`
	// Replicas are the member IDs of a replicated shard's raft group, the
	// preferred leader first; empty for a shard that is not replicated.
	// Raft, not this list, decides which replica leads at any moment.
	// It is the set the placer wants: after a move or a replacement the
	// group's membership (Voters, Learners) catches up with it.
	Replicas []string `json:"replicas,omitempty"`
	// Voters and Learners are the replicated shard's raft membership as
	// its leader last reported it, sorted by ID; nil until a report
	// arrived. InSync are the voters the leader reported caught up.
	Voters   []string `json:"voters,omitempty"`
	Learners []string `json:"learners,omitempty"`
	InSync   []string `json:"in_sync,omitempty"`
}

// Replicated reports whether a is a replicated shard's assignment.
func (a Assignment) Replicated() bool { return len(a.Replicas) > 0 }

// Equal reports whether a and b assign the same shard alike.
func (a Assignment) Equal(b Assignment) bool {
	return a.Shard == b.Shard && a.Owner == b.Owner && a.Durable == b.Durable && slices.Equal(a.Replicas, b.Replicas) &&
		slices.Equal(a.Voters, b.Voters) && slices.Equal(a.Learners, b.Learners) && slices.Equal(a.InSync, b.InSync)
}

// Holds reports whether member id holds a replica of a replicated shard,
// or is to: it is in Replicas, Voters or Learners. A member that holds a
// replica and is in none of them, while Voters is known (not nil), was
// removed from the group: its copy is stale.
func (a Assignment) Holds(id string) bool {
	return slices.Contains(a.Replicas, id) || slices.Contains(a.Voters, id) || slices.Contains(a.Learners, id)
}

// Moving reports whether a replicated shard's group is not yet its
// target set: the reported voters differ from Replicas (as sets) or a
// learner is catching up. False before the first report.
func (a Assignment) Moving() bool {
	return a.Voters != nil && (len(a.Learners) > 0 || !sameSet(a.Voters, a.Replicas))
}

// AllInSync reports whether every member of Replicas is a voter its leader
// reported caught up (false before the first report).
func (a Assignment) AllInSync() bool {
	for _, id := range a.Replicas {
		if !slices.Contains(a.InSync, id) {
			return false
		}
	}
	return a.Replicated()
}

// UnderReplicated reports whether a replicated shard has fewer in-sync
// voters than its replication factor (also before the first report).
func (a Assignment) UnderReplicated() bool { return a.Replicated() && len(a.InSync) < len(a.Replicas) }

// sameSet reports whether a and b hold the same IDs, each once.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(id string) bool { return !slices.Contains(b, id) })
}

// Placement is the whole cluster's shard ownership at one version. Version
// grows with every change (the store revision that wrote it).
type Placement struct {
	Version     int64        `json:"version"`
	Members     []Member     `json:"members"`
	Assignments []Assignment `json:"assignments"`
}

// Owner returns the member that owns s, and false when s is unassigned or
// its owner is not in Members. It scans the placement; callers that ask
// per publish build an Index once per version (Watcher.Current is one).
func (p *Placement) Owner(s Shard) (Member, bool) {
	for _, a := range p.Assignments {
		if a.Shard == s {
			for _, m := range p.Members {
				if m.ID == a.Owner {
					return m, true
				}
			}
			return Member{ID: a.Owner}, false
		}
	}
	return Member{}, false
}
