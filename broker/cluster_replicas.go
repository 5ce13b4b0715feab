package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// Routing for replicated shards. The placement names a shard's replica set
// (the preferred leader first); raft decides which replica leads. A broker
// holding a replica knows the leader from its raft group; another broker
// knows it from the answers of forwards it made (leaderHints), and until
// then guesses the preferred leader.

// openReplica opens this broker's replica of the shard r routes, with r's
// replica set, logging a failure (the shard's requests answer it again).
func (b *Broker) openReplica(sh *shard, r *route) {
	rep, err := sh.ensureReplica(b.replicaSpecOf(r))
	if err != nil {
		b.log.Error("replica cannot open", "stream", sh.st.spec.String(), "shard", sh.id, "err", err)
		return
	}
	rep.target.Store(&r.replicas)
}

func replicaIDs(ms []cluster.Member) []uint64 {
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		ids[i] = raftID(m.ID)
	}
	return ids
}

// openPlacedShards opens what the placement in force gives this broker of
// st, a stream registered after that placement came (its spec and the
// placement reach a broker by two watches, in either order): its replicas,
// and the logs of the durable shards it owns, as takeOwned does for a
// stream registered first. Without it such a log opened only at its first
// request, and the shard showed no commit account until then.
func (b *Broker) openPlacedShards(st *stream) {
	pv := b.placement.Load()
	if pv == nil {
		return
	}
	for i, sh := range st.shards {
		r := pv.lookup(st.spec.StreamKey, i)
		switch {
		case r == nil:
		case st.spec.replicated():
			if r.holds {
				b.openReplica(sh, r)
			}
		case st.spec.Durable && r.self:
			b.openOwnedLog(sh)
		}
	}
}

// openOwnedLog opens the log of durable shard sh, which this broker owns,
// logging a failure (the shard's first request retries and answers it).
func (b *Broker) openOwnedLog(sh *shard) {
	if _, err := sh.ensureDurable(); err != nil {
		b.log.Error("owned durable shard cannot open", "stream", sh.st.spec.String(), "shard", sh.id, "err", err)
	}
}

// leaderRoute is the route of a replicated shard for one request: to its
// leader as known here (self when this broker's replica leads), else to
// the preferred leader; a broker holding a replica that knows of no
// leader (an election is running) answers ErrOwnerUnavailable, which
// clients retry.
func (b *Broker) leaderRoute(k StreamKey, idx int, r *route) (*route, error) {
	var lead, term uint64
	if r.holds {
		st, err := b.streams.lookup(k)
		if err != nil || idx >= len(st.shards) {
			return nil, fmt.Errorf("%w: shard %s: not registered here yet", ErrOwnerUnavailable, r.shard)
		}
		sh := st.shards[idx]
		rep, err := sh.ensureReplica(b.replicaSpecOf(r))
		if err != nil {
			return nil, err
		}
		lead, term = rep.group.Leader()
		if lead == 0 {
			return nil, fmt.Errorf("%w: shard %s: %w (term %d)", ErrOwnerUnavailable, r.shard, ErrNoLeader, term)
		}
	} else {
		lead, term = b.raft.hints.get(groupName(k, idx))
	}
	if lead == 0 {
		return r, nil // the preferred leader
	}
	for _, m := range r.replicas {
		if raftID(m.ID) == lead {
			return r.via(m, b.cfg.NodeID, term), nil
		}
	}
	if m, ok := b.raft.member(lead); ok && r.holds && m.QUICAddr != "" {
		// A member the placement is moving out of the set leads until it
		// has handed its leadership over (seconds: the member joining is
		// added and caught up first). Raft here says so; the preferred
		// leader would forward it back, or refuse a forwarded publish.
		return r.via(m, b.cfg.NodeID, term), nil
	}
	return r, nil // a hint naming a leader outside the set: stale
}

// via is r through member m, which leads at term (self is this broker's
// id).
func (r *route) via(m cluster.Member, self string, term uint64) *route {
	me := m.ID == self
	return &route{self: me, live: me || m.Live, member: m, shard: r.shard, replicas: r.replicas, holds: r.holds,
		owner: wire.Owner{ID: m.ID, Addr: m.QUICAddr, Generation: term}}
}

// leaderHints are the leaders this broker learned of shards it holds no
// replica of, from forwards' not_leader answers, by group name.
type leaderHints struct {
	mu sync.Mutex
	m  map[string]leaderHint
}

// leaderHint is a leader's raft id and the term (or placement version)
// it was named at.
type leaderHint struct{ id, term uint64 }

// bound keeps a broker's hints to one per replicated shard it could route
// to: a few thousand entries at most in practice; past the bound, all are
// forgotten (each is relearned with one not_leader answer).
const maxLeaderHints = 1 << 16

func (h *leaderHints) get(group string) (id, term uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[group]
	return e.id, e.term
}

// learn records owner as group's leader: the latest answer wins.
func (h *leaderHints) learn(group string, owner *wire.Owner) {
	if owner == nil || owner.ID == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxLeaderHints {
		h.m = map[string]leaderHint{}
	}
	h.m[group] = leaderHint{id: raftID(owner.ID), term: owner.Generation}
}

// ownerCarrier is a forward's refusal that names the shard's owner (the
// leader, on a not_leader answer).
type ownerCarrier interface{ NamedOwner() *wire.Owner }

// learnLeader learns from the outcome of a forward along r, a replicated
// shard's route, where its leader is, and returns the owner the answer
// names: the leader a not_leader refusal named; after a failure to reach
// r's member, the next replica of the set is tried next time.
func (b *Broker) learnLeader(r *route, err error) *wire.Owner {
	group := groupName(StreamKey{Tenant: r.shard.Tenant, Namespace: r.shard.Namespace, Stream: r.shard.Stream}, r.shard.Shard)
	var oc ownerCarrier
	switch {
	case err == nil:
		b.raft.hints.learn(group, &r.owner)
	case errors.As(err, &oc) && oc.NamedOwner() != nil:
		b.raft.hints.learn(group, oc.NamedOwner())
		return oc.NamedOwner()
	case errors.Is(err, ErrOwnerUnavailable):
		for i, m := range r.replicas {
			if m.ID == r.member.ID {
				next := r.replicas[(i+1)%len(r.replicas)]
				b.raft.hints.learn(group, &wire.Owner{ID: next.ID, Addr: next.QUICAddr, Generation: r.owner.Generation})
				break
			}
		}
	}
	return &r.owner
}
