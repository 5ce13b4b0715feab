package broker

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// Cluster mode. A broker given a placement (SetPlacement) serves only the
// shards it owns: a publish for another broker's shard is forwarded once to
// the owner through Config.Forwarder and the owner's ack is relayed; a
// subscribe for it is refused with not_owner naming the owner. Without a
// placement the broker owns everything, and the publish path pays one nil
// check for the feature.

var (
	// ErrNotOwner: the shard belongs to another broker and this request
	// cannot be forwarded (a subscribe, an already forwarded publish, or
	// a broker without a Forwarder). The error names the owner.
	ErrNotOwner = errors.New("not_owner")
	// ErrOwnerUnavailable is cluster.ErrOwnerUnavailable, which the
	// forwarder (built on the client, so it cannot import the broker) wraps
	// too.
	ErrOwnerUnavailable = cluster.ErrOwnerUnavailable
)

// Forwarder sends a publish for a shard this broker does not own to its
// owner. cmd/felix-broker gives the broker one built on the client package
// (client/forward), authenticated with the node credential.
type Forwarder interface {
	// Forward sends payloads to shard s on owner, marked as forwarded so
	// that the owner never forwards them again. It copies payloads before
	// it returns (they alias the caller's frame buffer). done is called
	// exactly once: with the owner's ack for an acked publish (nil, or
	// the owner's refusal), once written for a fire-and-forget one. An
	// ok ack gives the batch's first offset when the owner said it
	// (known). A failure to reach the owner wraps ErrOwnerUnavailable.
	// Forwards to one owner and shard from one caller keep their order.
	Forward(owner cluster.Member, s cluster.Shard, payloads [][]byte, acked bool, done func(offset uint64, known bool, err error))
}

// route is one shard's owner as this broker sees it.
type route struct {
	self   bool
	live   bool
	member cluster.Member
	owner  wire.Owner // what acks and refusals carry
	shard  cluster.Shard
	// replicas is a replicated shard's replica set, the preferred leader
	// first (nil for other shards): raft decides the owner of the moment,
	// so routeOf resolves such a route per request (leaderRoute), and
	// member is the preferred leader. holds: one replica is this broker's
	// (it is in the set, or still in the group's membership).
	replicas []cluster.Member
	holds    bool
	// voters and learners are the group's membership as its leader last
	// reported it; reported is false before any report.
	voters, learners []string
	reported         bool
}

// placementView is a placement indexed for the publish path: per stream, a
// route per shard (nil where the shard is unassigned).
type placementView struct {
	version int64
	owned   int
	streams map[StreamKey][]*route
}

// lookup returns the route of shard idx of k, nil when unassigned (the
// shard is then served where the request landed).
func (v *placementView) lookup(k StreamKey, idx int) *route {
	rs := v.streams[k]
	if idx < len(rs) {
		return rs[idx]
	}
	return nil
}

func newPlacementView(p *cluster.Placement, self string) *placementView {
	members := make(map[string]cluster.Member, len(p.Members))
	for _, m := range p.Members {
		members[m.ID] = m
	}
	v := &placementView{version: p.Version, streams: map[StreamKey][]*route{}}
	for _, a := range p.Assignments {
		if a.Shard.Shard < 0 || a.Shard.Shard >= MaxShards || a.Owner == "" {
			continue
		}
		m, known := members[a.Owner]
		if !known {
			m = cluster.Member{ID: a.Owner}
		}
		r := &route{
			self: a.Owner == self, live: known && m.Live, member: m, shard: a.Shard,
			owner: wire.Owner{ID: m.ID, Addr: m.QUICAddr, Generation: uint64(max(p.Version, 0))},
		}
		if a.Replicated() {
			r.self = false
			for _, id := range a.Replicas {
				rm, ok := members[id]
				if !ok {
					rm = cluster.Member{ID: id}
				}
				r.replicas = append(r.replicas, rm)
				r.holds = r.holds || id == self
			}
			r.voters, r.learners, r.reported = a.Voters, a.Learners, a.Voters != nil
			r.holds = r.holds || slices.Contains(a.Voters, self) || slices.Contains(a.Learners, self)
			if r.holds {
				v.owned++
			}
		}
		if r.self {
			r.live = true
			v.owned++
		}
		k := streamKey(a.Tenant, a.Namespace, a.Stream)
		rs := v.streams[k]
		for len(rs) <= a.Shard.Shard {
			rs = append(rs, nil)
		}
		rs[a.Shard.Shard] = r
		v.streams[k] = rs
	}
	return v
}

// SetPlacement puts placement p in force, in which this broker is the
// member Config.NodeID; nil removes it (without NodeID the broker then owns
// every shard, with it none until the next placement). The logs of the
// durable shards p gives this broker are opened first. Requests already
// routed finish where they went.
func (b *Broker) SetPlacement(p *cluster.Placement) {
	if p == nil {
		b.placement.Store(nil)
		return
	}
	v := newPlacementView(p, b.cfg.NodeID)
	b.raft.setMembers(p.Members)
	b.takeOwned(b.placement.Load(), v)
	b.discardStale(v)
	b.placement.Store(v)
	b.log.Info("placement applied", "version", v.version, "node", b.cfg.NodeID, "shards_owned", v.owned)
}

// takeOwned readies the shards v makes this broker's before v is in force,
// while no publish can reach them here:
//
//   - a durable shard's log is opened (recovery can take a while). A
//     cluster broker opens no other durable shard: their records live on
//     their owners. A log that fails to open is retried, and its error
//     returned, by the first request for the shard; a stream not
//     registered yet opens on first use.
//   - an ephemeral shard that prev did not make this broker's (a move, a
//     restart, the first placement) restarts its offsets at v's epoch base
//     with an empty replay ring. It keeps no records across owners, so its
//     new owner cannot continue the old owner's offsets; starting above
//     them means a subscriber resuming with an offset the old owner gave
//     gets too_old naming the new first offset (and earliest works)
//     instead of in_future, or of records that reuse offsets it has seen.
func (b *Broker) takeOwned(prev, v *placementView) {
	for k, rs := range v.streams {
		st, err := b.streams.lookup(k)
		if err != nil {
			continue
		}
		for i, r := range rs {
			if r != nil && r.holds && i < len(st.shards) {
				b.openReplica(st.shards[i], r)
			}
			if r == nil || !r.self || i >= len(st.shards) {
				continue
			}
			switch {
			case st.spec.Durable:
				b.openOwnedLog(st.shards[i])
			case prev == nil || !prev.owns(k, i):
				st.shards[i].beginEpoch(epochBase(v.version))
			}
		}
	}
}

// result is the answer of a publish routed by r.
func (r *route) result(offset uint64) publishResult {
	return publishResult{offset: offset, shard: r.shard.Shard, owner: &r.owner}
}

// owns reports whether the view makes this broker the owner of shard idx
// of k.
func (v *placementView) owns(k StreamKey, idx int) bool {
	r := v.lookup(k, idx)
	return r != nil && r.self
}

// epochShift places an ownership epoch in the high bits of an ephemeral
// shard's offsets: placement version V starts at V<<32, leaving 4 G records
// per epoch and staying below 2^53 (exact in JSON numbers everywhere) up to
// version 2^21.
const epochShift = 32

// epochBase is the first offset of an ephemeral shard whose owner took it
// in placement version.
func epochBase(version int64) uint64 { return uint64(max(version, 0)) << epochShift }

// PlacementVersion is the version of the placement in force, 0 in
// single-broker mode.
func (b *Broker) PlacementVersion() int64 {
	if v := b.placement.Load(); v != nil {
		return v.version
	}
	return 0
}

// routeOf is the route of shard idx of k in the placement in force (its
// self is set when this broker owns it), nil in single-broker mode. In
// cluster mode (NodeID set) a shard the placement does not list yet (none
// applied, or a stream newer than the placement) waits up to
// Config.PlacementWait for one that does, and is then refused with
// ErrOwnerUnavailable: serving it here would put records on a broker the
// placer may not choose, where the owner's subscribers never see them.
func (b *Broker) routeOf(k StreamKey, idx int) (*route, error) {
	deadline := time.Now().Add(b.cfg.PlacementWait)
	for {
		pv := b.placement.Load()
		if pv != nil {
			if r := pv.lookup(k, idx); r != nil {
				if r.replicas != nil {
					return b.leaderRoute(k, idx, r)
				}
				return r, nil
			}
		}
		if b.cfg.NodeID == "" {
			return nil, nil
		}
		if b.draining.Load() || !time.Now().Before(deadline) {
			s := cluster.Shard{Tenant: k.Tenant, Namespace: k.Namespace, Stream: k.Stream, Shard: idx}
			if pv == nil {
				return nil, fmt.Errorf("%w: shard %s: this broker has no placement yet", ErrOwnerUnavailable, s)
			}
			return nil, fmt.Errorf("%w: shard %s is not in placement version %d yet", ErrOwnerUnavailable, s, pv.version)
		}
		// Placements are rare and this wait is the exception (a stream
		// created a moment ago): polling costs less than a notifier.
		time.Sleep(placementPoll)
	}
}

// placementPoll is how often routeOf looks for a placement listing a shard.
const placementPoll = 10 * time.Millisecond

func notOwner(r *route) error {
	return fmt.Errorf("%w: shard %s is owned by %s at %s", ErrNotOwner, r.shard, r.member.ID, r.member.QUICAddr)
}

func ownerUnavailable(r *route, why string) error {
	return fmt.Errorf("%w: shard %s: owner %s (%s) %s", ErrOwnerUnavailable, r.shard, r.member.ID, r.member.QUICAddr, why)
}

// forward sends a publish for r's shard to its owner, or answers why it
// cannot: done gets the owner's outcome. It holds the broker's inflight
// count (taken by publish) until done.
func (p *publisher) forward(r *route, payloads, headers [][]byte, acked bool, done func(publishResult, error)) {
	b := p.c.b
	var err error
	switch {
	case p.forwarded:
		err = notOwner(r) // forwarded once already: never again
	case copyHeaders(headers) != nil:
		err = notOwner(r) // the forward carries no headers: publish to the owner
	case !r.live:
		err = ownerUnavailable(r, "is not live")
	case b.cfg.Forwarder == nil:
		err = notOwner(r)
	}
	if err != nil {
		b.metrics.cluster.forwardErrors.Add(1)
		done(r.result(0), err)
		b.inflight.Add(-1)
		return
	}
	events, bytes := len(payloads), payloadBytes(payloads)
	b.cfg.Forwarder.Forward(r.member, r.shard, payloads, acked, func(offset uint64, known bool, err error) {
		if err != nil {
			b.metrics.cluster.forwardErrors.Add(1)
		} else {
			b.metrics.cluster.forwarded(events, bytes)
		}
		res := r.result(offset)
		res.noOffset = !known
		if r.replicas != nil {
			res.owner = b.learnLeader(r, err)
		}
		done(res, err)
		b.inflight.Add(-1)
	})
}

// verify authenticates an auth frame. A stream that advertises
// wire.CapForwarded is a forwarding broker's: it must present a node
// credential (Config.NodeToken, or one Config.NodeVerifier accepts), and
// gets a node principal for the claimed tenant that may only publish, until
// the credential expires: the forwarding broker checked the client's own
// rights before forwarding. Everything else goes to the verifier.
func (b *Broker) verify(ctx context.Context, auth *wire.Auth) (Principal, error) {
	if len(auth.TenantID) > maxTenantBytes {
		return nil, fmt.Errorf("%w: tenant_id of %d bytes, more than %d", ErrAuth, len(auth.TenantID), maxTenantBytes)
	}
	if !wire.Supports(wire.PeerSet(auth.ClientFlags, auth.ClientCaps), wire.CapForwarded) {
		return b.verifier.Verify(ctx, auth.TenantID, auth.Token)
	}
	cred, err := b.nodeCredential(ctx, auth.Token)
	if err == nil && auth.TenantID == "" {
		err = errors.New("empty tenant")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: a forwarded stream needs a node credential: %w", ErrAuth, err)
	}
	if ok, n := b.authLog.allow(time.Now()); ok {
		b.log.Info("forwarded stream opened", "node", clip(cred.Subject), "tenant", clip(auth.TenantID),
			"until", cred.Expiry, "lines_suppressed", n)
	}
	return nodePrincipal{tenant: auth.TenantID, cred: cred}, nil
}

// authRefused logs a refused auth frame, rate-limited and with what the
// peer chose clipped: refusals cost an unauthenticated peer nothing.
func (b *Broker) authRefused(conn uint64, auth *wire.Auth, err error) {
	if ok, n := b.authLog.allow(time.Now()); ok {
		b.log.Warn("auth refused", "conn", conn, "tenant", clip(auth.TenantID),
			"forwarded", wire.Supports(wire.PeerSet(auth.ClientFlags, auth.ClientCaps), wire.CapForwarded),
			"err", clipTo(logDetail(err), maxErrorEchoBytes), "lines_suppressed", n)
	}
}

// maxTenantBytes is the longest tenant name an auth frame may claim, as
// for every other name (registry.go).
const maxTenantBytes = 255

// NodeCredential is what a node credential proved: which broker presented
// it and until when it is valid.
type NodeCredential struct {
	Subject string
	// Expiry ends the forwarded streams it authenticated, as a token's
	// does; zero (the shared NodeToken) never.
	Expiry time.Time
}

func (b *Broker) nodeCredential(ctx context.Context, token string) (NodeCredential, error) {
	if b.cfg.NodeToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(b.cfg.NodeToken)) == 1 {
		return NodeCredential{Subject: "shared node token"}, nil
	}
	if b.cfg.NodeVerifier == nil {
		return NodeCredential{}, errors.New("this broker accepts none (not in cluster mode, or no operator tenant)")
	}
	return b.cfg.NodeVerifier(ctx, token)
}

// nodePrincipal is a forwarding broker acting for tenant: publish only.
type nodePrincipal struct {
	tenant string
	cred   NodeCredential
}

func (p nodePrincipal) Tenant() string    { return p.tenant }
func (p nodePrincipal) Expiry() time.Time { return p.cred.Expiry }
func (p nodePrincipal) Subject() string   { return "node " + p.cred.Subject }
func (p nodePrincipal) Check(a auth.Action, resource string) error {
	if a == auth.ActionPublish {
		return nil
	}
	return fmt.Errorf("%w: the node credential only forwards publishes, not %s on %s", ErrForbidden, a, resource)
}
