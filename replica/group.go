package replica

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/segment"
)

// Ack says when a proposal is answered.
type Ack uint8

const (
	// AckQuorum answers once raft committed the records: a majority holds
	// them (durably under SyncEachWrite).
	AckQuorum Ack = iota
	// AckLeader answers once the leader's own copy counts (written, and
	// synced under SyncEachWrite); a failover may lose what no follower
	// had yet.
	AckLeader
)

// Group is one replica of one shard's raft group. See doc.go.
type Group struct {
	cfg Config
	rn  *raft.RawNode
	st  *storage

	in struct {
		sync.Mutex
		msgs        []*pb.Message
		props       []*proposal
		unreachable []uint64
		changes     []change
		transfer    uint64
		closed      bool
	}
	wake  chan struct{} // one slot: inputs are waiting
	tickc chan struct{} // one slot: a tick is due
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	status atomic.Pointer[Status]

	// The group goroutine's own.
	props    proposals
	held     held // proposals waiting for raft to have room (admission.go)
	leader   bool
	savedAt  time.Time
	saved    uint64 // commit index last saved
	applied  uint64
	failed   error // a log failure: the group stopped taking part
	progress map[uint64]uint64
	silent   []uint64 // with progress: replicas not heard from lately
	// progressLast is this log's last index when progress was read.
	progressLast uint64
	quiet        map[uint64]int // ticks each replica has been silent, on a leader
	lastIndex    uint64
	// syncs and syncedRecords count the log syncs under SyncEachWrite and
	// the entries they made durable: their ratio is the group commit's
	// batching.
	syncs, syncedRecords uint64
	slow                 slowWrites
}

// Open opens (recovering its state) or creates the replica in cfg.Dir and
// starts its goroutine.
func Open(cfg Config) (*Group, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := loadState(cfg.FS, cfg.Dir)
	if err != nil {
		return nil, err
	}
	if st == nil {
		if cfg.Log.Next() != cfg.Log.First() {
			return nil, fmt.Errorf("%w: %s has records but no %s", ErrCorruptState, cfg.Dir, StateFile)
		}
		st = &state{hs: &pb.HardState{}, cs: &pb.ConfState{Voters: slices.Clone(cfg.Peers), Learners: slices.Clone(cfg.Learners)},
			snapshot: termStart{index: cfg.Log.First()}}
		if err := st.save(cfg.FS, cfg.Dir); err != nil {
			return nil, err
		}
	}
	if err := rebuildTerms(cfg.Log, st); err != nil {
		return nil, err
	}
	g := &Group{
		cfg: cfg, st: &storage{log: cfg.Log, st: st},
		wake: make(chan struct{}, 1), tickc: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
		saved: st.hs.GetCommit(), applied: st.hs.GetCommit(), savedAt: cfg.Now(),
	}
	rc := &raft.Config{
		ID: cfg.ID, ElectionTick: cfg.ElectionTicks, HeartbeatTick: cfg.HeartbeatTicks,
		Storage: g.st, Applied: g.applied,
		MaxSizePerMsg: cfg.MaxSizePerMsg, MaxInflightMsgs: cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: cfg.MaxUncommittedBytes,
		CheckQuorum:               true, PreVote: true,
		Logger: raftLogger{cfg.Logger},
	}
	if g.rn, err = raft.NewRawNode(rc); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	g.lastIndex = g.st.lastIndex()
	g.publishStatus()
	go g.run()
	return g, nil
}

// rebuildTerms makes st's term starts agree with the log, which is their
// authority: the saved list is a hint, kept while each start is a
// generation record of that term in the log (those before the log's first
// record cannot be checked and are kept); from the last one kept, the
// log's generation records are read again, since a crash may come after a
// new term's first entry was written and before the state saved it.
func rebuildTerms(log *segment.Log, st *state) error {
	first, next := log.First(), log.Next()
	kept, from := st.terms[:0], first
	for _, t := range st.terms {
		off := t.index - 1
		if off >= first {
			term, ok, err := generationAt(log, off, next)
			if err != nil {
				return err
			}
			if !ok || term != t.term {
				break
			}
			from = off + 1
		}
		kept = append(kept, t)
	}
	st.terms = kept
	if from >= next {
		return nil
	}
	r, err := log.NewReader(from)
	if err != nil {
		return err
	}
	defer r.Close()
	for off := from; off < next; off++ {
		rec, err := r.Next()
		if err != nil {
			return fmt.Errorf("replica: reading terms at %d: %w", off, err)
		}
		if term, ok := termOfRecord(rec); ok {
			st.noteTerm(term, rec.Offset+1)
		}
	}
	return nil
}

// generationAt is the term of the generation record at off, false when
// off is past the log or holds another record.
func generationAt(log *segment.Log, off, next uint64) (uint64, bool, error) {
	if off >= next {
		return 0, false, nil
	}
	r, err := log.NewReader(off)
	if err != nil {
		return 0, false, err
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		return 0, false, err
	}
	term, ok := termOfRecord(rec)
	return term, ok, nil
}

// Propose asks the leader to append recs as one batch (their Offset fields
// are not read) and calls done once with the offset of the first, or an
// error: a *NotLeaderError, ErrProposalDropped (nothing appended),
// ErrLeadershipLost or ErrQuorumTimeout (outcome unknown), ErrClosed, or
// the log's failure. placed, if not nil, is called
// first, once the batch has its offsets in the leader's log (before it is
// durable or committed), so that the owner can record where it went; it is
// not called for a batch that never got offsets. Both run on the group's
// goroutine and must not block.
func (g *Group) Propose(recs []segment.Record, ack Ack, placed func(first uint64), done func(first uint64, err error)) {
	g.enqueue(g.newProposal(recs, ack, placed, done))
}

func (g *Group) newProposal(recs []segment.Record, ack Ack, placed func(first uint64), done func(first uint64, err error)) *proposal {
	p := &proposal{n: len(recs), ack: ack, placedFn: placed, done: done, at: g.cfg.Now()}
	p.data = make([][]byte, len(recs))
	for i, r := range recs {
		p.data[i] = eventData(r)
		p.size += uint64(len(p.data[i]))
	}
	return p
}

// enqueue hands ps to the group's goroutine, together.
func (g *Group) enqueue(ps ...*proposal) {
	g.in.Lock()
	if g.in.closed {
		g.in.Unlock()
		failEach(ps, ErrClosed)
		return
	}
	g.in.props = append(g.in.props, ps...)
	g.in.Unlock()
	signal(g.wake)
}

// Step hands the group a message from another replica.
func (g *Group) Step(m *pb.Message) {
	g.in.Lock()
	if !g.in.closed {
		g.in.msgs = append(g.in.msgs, m)
	}
	g.in.Unlock()
	signal(g.wake)
}

// ReportUnreachable tells raft that a message to id was not delivered.
func (g *Group) ReportUnreachable(id uint64) {
	g.in.Lock()
	if !g.in.closed {
		g.in.unreachable = append(g.in.unreachable, id)
	}
	g.in.Unlock()
	signal(g.wake)
}

// Tick advances raft's clock by one tick (the broker's one ticker calls it
// for every group). It never blocks; ticks that come while one is pending
// are merged.
func (g *Group) Tick() { signal(g.tickc) }

// Close stops the group; pending proposals fail with ErrClosed. It saves
// the state and returns once the goroutine is gone. It does not close the
// log.
func (g *Group) Close() error {
	g.once.Do(func() {
		g.in.Lock()
		g.in.closed = true
		g.in.Unlock()
		close(g.stop)
	})
	<-g.done
	return nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (g *Group) run() {
	defer close(g.done)
	for {
		select {
		case <-g.stop:
			g.props.failAll(ErrClosed)
			g.refuseHeld(ErrClosed)
			g.failInputs(ErrClosed)
			g.saveCommit(true)
			return
		case <-g.tickc:
			if g.failed == nil {
				g.rn.Tick()
			}
			g.onTick()
		case <-g.wake:
		}
		g.drain()
		g.ready()
		g.publishStatus()
	}
}

// ready handles raft's Readies until it has none. Applying entries makes
// room for what waits to be proposed (raft counts its uncommitted bytes
// down at Advance), and a replica that stopped leading answers what waits
// as not the leader.
func (g *Group) ready() {
	for g.failed == nil && g.rn.HasReady() {
		applied := g.applied
		if err := g.handle(g.rn.Ready()); err != nil {
			g.fail(err)
			return
		}
		if len(g.held.q) > 0 && (g.applied > applied || !g.leader) {
			g.admit(nil)
		}
	}
}

// fail stops the group taking part after a storage failure: the log (or
// the state file) cannot be trusted to hold what raft was told it holds.
func (g *Group) fail(err error) {
	g.failed = err
	g.cfg.Logger.Error("replica: storage failed; the replica stops taking part", "dir", g.cfg.Dir, "err", err)
	g.props.failAll(err)
	g.refuseHeld(err)
}

// failInputs answers the proposals still queued with err.
func (g *Group) failInputs(err error) {
	g.in.Lock()
	props := g.in.props
	g.in.props = nil
	g.in.Unlock()
	failEach(props, err)
}

// drain steps what arrived since the last round: messages, reports,
// proposals (refused at once by a follower).
func (g *Group) drain() {
	g.in.Lock()
	msgs, props, unreach := g.in.msgs, g.in.props, g.in.unreachable
	changes, transfer := g.in.changes, g.in.transfer
	g.in.msgs, g.in.props, g.in.unreachable, g.in.changes, g.in.transfer = nil, nil, nil, nil, 0
	g.in.Unlock()
	for _, m := range msgs {
		if g.failed == nil {
			_ = g.rn.Step(m) // raft ignores what does not concern it
		}
	}
	for _, id := range unreach {
		g.rn.ReportUnreachable(id)
	}
	g.applyRequests(changes, transfer)
	g.admit(props)
}

// propose steps p into raft, or answers it; false, unanswered, when raft
// dropped it.
func (g *Group) propose(p *proposal) bool {
	if g.failed != nil {
		p.done(0, g.failed)
		return true
	}
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		p.done(0, &NotLeaderError{Leader: bs.Lead, Term: bs.GetTerm()})
		return true
	}
	if bs.LeadTransferee != 0 {
		// Handing over: raft drops proposals; the target leads next.
		p.done(0, &NotLeaderError{Leader: bs.LeadTransferee, Term: bs.GetTerm()})
		return true
	}
	ents := make([]*pb.Entry, len(p.data))
	for i, d := range p.data {
		ents[i] = &pb.Entry{Data: d}
	}
	err := g.rn.Step(&pb.Message{Type: pb.MessageType_MsgProp.Enum(), From: proto.Uint64(g.cfg.ID), Entries: ents})
	if errors.Is(err, raft.ErrProposalDropped) {
		return false
	}
	if err != nil {
		p.done(0, err)
		return true
	}
	p.term, p.data = bs.GetTerm(), nil
	g.props.add(p)
	return true
}

func (g *Group) onTick() {
	cutoff := g.cfg.Now().Add(-g.cfg.QuorumTimeout)
	g.props.expire(cutoff)
	g.expireHeld(cutoff)
	g.saveCommit(false)
	if g.leader {
		g.leaderProgress()
	}
}
