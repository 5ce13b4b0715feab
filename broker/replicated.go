package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/replica"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// Replication errors, coded as the published Felix codes them.
var (
	// ErrLeadershipLost: the shard's leader stepped down before a publish
	// it took was committed; it may or may not be (outcome unknown: an
	// idempotent re-send is safe).
	ErrLeadershipLost = errors.New("leadership_lost")
	// ErrQuorumTimeout: a quorum publish was not committed by a majority
	// in time (outcome unknown).
	ErrQuorumTimeout = errors.New("quorum_timeout")
	// ErrNoLeader: the shard's replicas have no leader right now (an
	// election is running); retry.
	ErrNoLeader = errors.New("no leader")
)

// replicated is the storage of one replicated durable shard: its log, and
// the raft group whose log it is (package replica). Publishes become
// proposals; committed records reach the shard's ring and subscribers
// through apply, on every replica, in log order.
type replicated struct {
	sh       *shard
	name     string // the group's name on the wire: "tenant/namespace/stream#shard"
	log      *segment.Log
	group    *replica.Group
	ack      replica.Ack
	periodic bool
	space    *logSpace
	quorum   quorumWait
	// target is the replica set the placement wants (preferred leader
	// first); the leader moves the group's membership toward it
	// (replicated_members.go).
	target  atomic.Pointer[[]cluster.Member]
	members memberSteps
	// reportSum is a digest of what this replica last had to report (0:
	// not leading); the raft ticker alone uses it.
	reportSum uint64
	// prebuilt is closed once prebuildProducers has returned; closing
	// makes it give up.
	prebuilt chan struct{}
	closing  atomic.Bool

	mu struct {
		sync.Mutex
		// waiters are called once the committed tail reaches their
		// offset (a duplicate idempotent batch answered once committed).
		waiters []tailWaiter
	}
}

type tailWaiter struct {
	end      uint64
	deadline time.Time
	done     func(error)
}

// groupName is a shard's raft group name.
func groupName(k StreamKey, shard int) string {
	return fmt.Sprintf("%s/%s/%s#%d", k.Tenant, k.Namespace, k.Stream, shard)
}

// openReplicated opens (recovering) this broker's replica of shard i of
// spec, whose replica set is peers (raft ids), and starts its group.
func openReplicated(b *Broker, sh *shard, rs replicaSpec) (*replicated, error) {
	spec := sh.st.spec
	if b.cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStream, ErrNoDataDir)
	}
	dir := b.shardDir(spec, sh.id)
	cfg := b.cfg.Storage
	cfg.FormatVersion = segment.FormatVersionV4
	cfg.KeepPartialBatches = true
	cfg.Logger = b.log.With("stream", spec.String(), "shard", sh.id)
	space := b.space.forLog(spec.Tenant)
	cfg.Space = space
	log, err := segment.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	space.charge(log.Stats().Recovery.FoundBytes)
	r := &replicated{sh: sh, name: groupName(spec.StreamKey, sh.id), log: log, space: space,
		periodic: spec.Fsync != "on_commit" && spec.Fsync != "never"}
	if spec.Ack == "leader" {
		r.ack = replica.AckLeader
	}
	r.group, err = replica.Open(replica.Config{
		ID: raftID(b.cfg.NodeID), Peers: rs.voters, Learners: rs.learners, Dir: dir, Log: log, FS: b.cfg.Storage.FS,
		SyncEachWrite: spec.Fsync == "on_commit",
		Transport:     groupTransport{b.raft, r},
		Apply:         r.apply, OnLeader: r.onLeader,
		ElectionTicks: b.cfg.RaftElectionTicks, HeartbeatTicks: b.cfg.RaftHeartbeatTicks,
		QuorumTimeout: b.cfg.QuorumTimeout,
		Logger:        cfg.Logger,
	})
	if err != nil {
		log.Close()
		space.releaseAll()
		return nil, err
	}
	b.raft.add(r)
	r.target.Store(&rs.target)
	// A replica opened anew (a stale copy discarded, a member added again)
	// has a log of its own: the producer table's committed base is read
	// from it afresh.
	sh.idem.mu.Lock()
	sh.idem.base = nil
	sh.idem.mu.Unlock()
	r.prebuilt = make(chan struct{})
	go r.prebuildProducers()
	b.log.Info("replica opened", "stream", spec.String(), "shard", sh.id, "dir", dir, "voters", len(rs.voters), "joins", len(rs.learners) > 0,
		"first", log.First(), "next", log.Next())
	return r, nil
}

// groupTransport is a group's view of the broker's raft transport.
type groupTransport struct {
	h *raftHost
	r *replicated
}

func (t groupTransport) Send(msgs []*pb.Message) { t.h.send(t.r, msgs) }

// publish proposes payloads as one batch (marked as hook's idempotent
// batch, if any). done gets the first offset once the batch counts per
// the stream's ack mode, or an error. Delivery to subscribers happens at
// commit, in apply.
func (r *replicated) publish(payloads [][]byte, meta *batchMeta, hook *appendHook, done func(uint64, error)) {
	now := time.Now().UnixMicro()
	recs := make([]segment.Record, len(payloads))
	mark := hook.batchMark()
	publisher, headers := meta.storedPublisher(), meta.storedHeaders()
	for i, p := range payloads {
		recs[i] = segment.Record{TimestampMicros: now, Payload: p, Publisher: publisher}
		if headers != nil {
			recs[i].Headers = headers[i]
		}
		switch {
		case mark == nil:
		case i == 0:
			recs[i].Mark = segment.Mark{Kind: segment.MarkOpens, ProducerID: mark.ProducerID, Sequence: mark.Sequence, Len: uint32(len(payloads))}
		default:
			recs[i].Mark = segment.Mark{Kind: segment.MarkContinues}
		}
	}
	var placed func(uint64)
	if hook != nil {
		placed = hook.appendedLocked
	}
	start := time.Now()
	r.group.Propose(recs, r.ack, placed, func(first uint64, err error) {
		if err == nil && r.ack == replica.AckQuorum {
			d := time.Since(start)
			r.quorum.observe(d)
			r.sh.b.metrics.raft.quorumLatency.Observe(d.Seconds())
		}
		done(first, r.refusal(err))
	})
}

// refusal is the broker's error for a proposal's failure.
func (r *replicated) refusal(err error) error {
	var nl *replica.NotLeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl):
		if m, ok := r.sh.b.raft.member(nl.Leader); ok && nl.Leader != 0 {
			return &notLeaderError{shard: r.shard(), leader: m, term: nl.Term}
		}
		return fmt.Errorf("%w: shard %s: %w (term %d)", ErrOwnerUnavailable, r.shard(), ErrNoLeader, nl.Term)
	case errors.Is(err, replica.ErrProposalDropped):
		// This broker leads: not_leader would name it. Nothing was
		// appended, so the client backs off and sends the batch again.
		return fmt.Errorf("%w: shard %s: %v", ErrOverloaded, r.shard(), err)
	case errors.Is(err, replica.ErrLeadershipLost):
		return fmt.Errorf("%w: shard %s: %v", ErrLeadershipLost, r.shard(), err)
	case errors.Is(err, replica.ErrQuorumTimeout):
		return fmt.Errorf("%w: shard %s: not committed within %v", ErrQuorumTimeout, r.shard(), r.sh.b.cfg.QuorumTimeout)
	}
	return err
}

func (r *replicated) shard() cluster.Shard {
	k := r.sh.st.spec.StreamKey
	return cluster.Shard{Tenant: k.Tenant, Namespace: k.Namespace, Stream: k.Stream, Shard: r.sh.id}
}

// notLeaderError refuses a request to a replica that is not its shard's
// leader, naming the leader: coded not_leader, with the leader as owner.
type notLeaderError struct {
	shard  cluster.Shard
	leader cluster.Member
	term   uint64
}

func (e *notLeaderError) Error() string {
	return fmt.Sprintf("%v: shard %s is led by %s at %s (term %d)", ErrNotOwner, e.shard, e.leader.ID, e.leader.QUICAddr, e.term)
}

func (e *notLeaderError) Unwrap() error { return ErrNotOwner }

// refusal is the idempotent producer's not_leader refusal naming the leader.
func (e *notLeaderError) refusal() *producerRefusal {
	addr := e.leader.QUICAddr
	return &producerRefusal{reason: wire.Refusal{Kind: wire.RefusedNotLeader, NodeID: e.leader.ID, Addr: &addr}, msg: e.Error()}
}

// owner is the leader as acks and refusals name an owner.
func (e *notLeaderError) owner() *wire.Owner {
	return &wire.Owner{ID: e.leader.ID, Addr: e.leader.QUICAddr, Generation: e.term}
}

// apply is told of committed records, in order, on the group's goroutine:
// events go to the ring and the subscribers (one buffer per run of
// consecutive offsets from one publisher), the tail moves to the end of
// what is committed, and waiters on it are answered.
func (r *replicated) apply(events []segment.Record, tail uint64) {
	sh := r.sh
	for i := 0; i < len(events); {
		j := i + 1
		for j < len(events) && events[j].Offset == events[j-1].Offset+1 && string(events[j].Publisher) == string(events[i].Publisher) {
			j++
		}
		payloads := make([][]byte, j-i)
		for k := range payloads {
			payloads[k] = events[i+k].Payload
		}
		if buf, err := sh.encode(payloads); err == nil {
			if meta := committedMeta(events[i:j]); meta != nil {
				buf.Extra = meta
			}
			sh.deliverCommitted(buf, events[i].Offset)
			buf.Release()
		} else {
			sh.b.log.Error("replica: committed records cannot be delivered", "stream", sh.st.spec.String(),
				"shard", sh.id, "first", events[i].Offset, "err", err)
		}
		i = j
	}
	sh.mu.Lock()
	if tail > sh.mu.next {
		sh.mu.next = tail
	}
	sh.mu.Unlock()
	r.log.SetRetentionFloor(tail)
	r.answerWaiters(tail)
}

// whenCommitted calls done once a batch this leader holds up to end
// counts as the stream's ack mode says (a duplicate idempotent batch is
// answered with the wait its first send had): written here for leader
// acks, committed for quorum acks. It fails with quorum_timeout after the
// quorum timeout, and with leadership_lost if this replica steps down
// first.
func (r *replicated) whenCommitted(end uint64, done func(error)) {
	r.mu.Lock()
	if r.reached(end, r.sh.tail()) {
		r.mu.Unlock()
		done(nil)
		return
	}
	r.mu.waiters = append(r.mu.waiters, tailWaiter{end: end, deadline: time.Now().Add(r.sh.b.cfg.QuorumTimeout), done: done})
	r.mu.Unlock()
}

func (r *replicated) reached(end, tail uint64) bool {
	if r.ack == replica.AckLeader {
		return r.log.Next() >= end
	}
	return tail >= end
}

// answerWaiters answers the waiters the committed tail reached (err nil),
// or with err all those past their deadline, or every one (all).
func (r *replicated) answerWaiters(tail uint64) { r.settleWaiters(tail, time.Time{}, nil, false) }

func (r *replicated) settleWaiters(tail uint64, now time.Time, err error, all bool) {
	r.mu.Lock()
	type answer struct {
		w   tailWaiter
		err error
	}
	var ready []answer
	kept := r.mu.waiters[:0]
	for _, w := range r.mu.waiters {
		switch {
		case r.reached(w.end, tail):
			ready = append(ready, answer{w, nil})
		case all || (!now.IsZero() && now.After(w.deadline)):
			ready = append(ready, answer{w, err})
		default:
			kept = append(kept, w)
		}
	}
	r.mu.waiters = kept
	r.mu.Unlock()
	for _, a := range ready {
		a.w.done(a.err)
	}
}

// expireWaiters fails the waiters past their deadline (the broker's raft
// ticker calls it).
func (r *replicated) expireWaiters(now time.Time) {
	r.mu.Lock()
	n := len(r.mu.waiters)
	r.mu.Unlock()
	if n > 0 {
		r.settleWaiters(r.sh.tail(), now, r.refusal(replica.ErrQuorumTimeout), false)
	}
}

// onLeader is told of this replica's leadership changing: the idempotent
// producers' table is rebuilt from the log before the next batch
// (replicated_idem.go); a former leader's waiters are answered
// leadership_lost. It runs on the group's goroutine, so it takes no lock a
// publish may hold while it waits for the group.
func (r *replicated) onLeader(leader bool) {
	sh := r.sh
	sh.idem.epoch.Add(1)
	if !leader {
		r.settleWaiters(sh.tail(), time.Time{}, r.refusal(replica.ErrLeadershipLost), true)
		return
	}
	sh.b.metrics.raft.elections.Inc()
}

// syncPeriodic is the periodic fsync mode's sync of the replica's log.
func (r *replicated) syncPeriodic() {
	if err := r.log.Sync(); err != nil {
		r.sh.b.log.Error("replica: periodic sync failed", "stream", r.sh.st.spec.String(), "shard", r.sh.id, "err", err)
	}
}

// close stops the group and closes the log; waiters are answered with
// ErrDraining.
func (r *replicated) close() error {
	r.closing.Store(true)
	<-r.prebuilt
	r.sh.b.raft.remove(r)
	err := r.group.Close()
	r.mu.Lock()
	waiters := r.mu.waiters
	r.mu.waiters = nil
	r.mu.Unlock()
	for _, w := range waiters {
		w.done(ErrDraining)
	}
	err = errors.Join(err, r.log.Sync(), r.log.Close())
	r.space.releaseAll()
	return err
}

// committedMeta is the meta of a run of committed records from one
// publisher, as a publish gives it to the subscribers (nil for none).
func committedMeta(recs []segment.Record) *batchMeta {
	var m batchMeta
	m.publisher = string(recs[0].Publisher)
	for i, rec := range recs {
		if rec.Headers == nil {
			continue
		}
		if m.headers == nil {
			m.headers = make([][]byte, len(recs))
		}
		m.headers[i] = rec.Headers
	}
	m.headers = copyHeaders(m.headers) // they alias the log's mapping
	if m.publisher == "" && m.headers == nil {
		return nil
	}
	return &m
}
