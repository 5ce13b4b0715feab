package replica

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/segment"
)

// handle does what a Ready asks, in the order raft's safety needs: a
// leader may send its appends before its own copy is written (its copy
// counts only at Advance), everyone else only after; term and vote are
// synced before any message that depends on them; what a replica appended
// is synced (under SyncEachWrite) before it answers its leader or counts
// its own copy; committed entries are applied in order.
func (g *Group) handle(rd raft.Ready) error {
	if rd.SoftState != nil {
		g.noteRole(rd.SoftState.RaftState == raft.StateLeader)
	}
	if g.leader {
		g.send(rd.Messages)
		if len(rd.Messages) > 0 && len(rd.Entries) > 0 {
			// The transport's goroutines that take these appends were
			// just made runnable on this goroutine's thread; through the
			// write and sync below they wait for it unless another thread
			// is free to take them, which on a loaded machine is seldom
			// soon. Yielding sends the appends first, so the followers'
			// round trip overlaps this replica's sync instead of
			// following it.
			runtime.Gosched()
		}
	}
	persistStart := time.Now()
	termsChanged := false
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := g.install(rd.Snapshot); err != nil {
			return err
		}
		termsChanged = true
	}
	if len(rd.Entries) > 0 {
		changed, err := g.appendEntries(rd.Entries)
		if err != nil {
			return err
		}
		termsChanged = termsChanged || changed
	}
	if err := g.saveHardState(rd.HardState, termsChanged); err != nil {
		return err
	}
	if g.cfg.SyncEachWrite && len(rd.Entries) > 0 {
		if err := g.cfg.Log.Sync(); err != nil {
			return err
		}
		g.syncs++
		g.syncedRecords += uint64(len(rd.Entries))
	}
	g.slow.note(g.cfg.Logger, time.Since(persistStart), len(rd.Entries))
	if g.leader {
		g.props.persisted()
	} else {
		g.send(rd.Messages)
	}
	if err := g.apply(rd.CommittedEntries); err != nil {
		return err
	}
	g.rn.Advance(rd)
	return nil
}

// noteRole fails what a leader had accepted when it steps down: a newer
// leader may still commit the records, or not.
func (g *Group) noteRole(leader bool) {
	if g.leader && !leader {
		g.props.failAll(ErrLeadershipLost)
		g.progress, g.silent, g.quiet = nil, nil, nil
	}
	if g.leader != leader {
		g.cfg.OnLeader(leader)
	}
	g.leader = leader
}

func (g *Group) send(msgs []*pb.Message) {
	if len(msgs) == 0 {
		return
	}
	g.cfg.Transport.Send(msgs)
	for _, m := range msgs {
		if m.GetType() == pb.MessageType_MsgSnap {
			// A snapshot carries no data (doc.go): once sent it is done.
			g.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
}

// appendEntries writes ents to the log, cutting first a tail that they
// replace, and places the leader's proposals among them. It reports
// whether the term starts changed.
func (g *Group) appendEntries(ents []*pb.Entry) (bool, error) {
	st := g.st.st
	first := ents[0].GetIndex()
	changed := false
	if first <= g.st.lastIndex() {
		if err := g.cfg.Log.TruncateFrom(first - 1); err != nil {
			return false, err
		}
		g.st.mu.Lock()
		changed = st.cutTerms(first)
		g.st.mu.Unlock()
	}
	recs := make([]segment.Record, len(ents))
	for i, e := range ents {
		r, err := recordOf(e)
		if err != nil {
			return false, err
		}
		recs[i] = r
	}
	if _, err := g.cfg.Log.AppendRecords(recs); err != nil {
		return false, err
	}
	g.st.remember(ents)
	g.st.mu.Lock()
	prev := st.termAt(first - 1)
	for _, e := range ents {
		if t := e.GetTerm(); t > prev {
			changed = st.noteTerm(t, e.GetIndex()) || changed
			prev = t
		}
	}
	g.st.mu.Unlock()
	if g.leader {
		for i, e := range ents {
			if recs[i].Mark.IsEvent() {
				g.props.place(e.GetIndex()-1, e.GetTerm())
			}
		}
	}
	return changed, nil
}

// install starts the log where the leader's snapshot ends.
func (g *Group) install(snap *pb.Snapshot) error {
	md := snap.GetMetadata()
	if err := g.cfg.Log.Reset(md.GetIndex()); err != nil {
		return err
	}
	g.st.forgetAll()
	st := g.st.st
	g.st.mu.Lock()
	st.snapshot = termStart{index: md.GetIndex(), term: md.GetTerm()}
	st.terms = nil
	st.cs = proto.Clone(md.GetConfState()).(*pb.ConfState)
	g.st.mu.Unlock()
	g.applied = md.GetIndex()
	g.cfg.Apply(nil, md.GetIndex())
	return nil
}

// saveHardState saves the state when term or vote changed, or the term
// starts or membership did (synced: messages depending on them follow);
// a commit-only change is kept for saveCommit.
func (g *Group) saveHardState(hs *pb.HardState, force bool) error {
	st := g.st.st
	g.st.mu.Lock()
	changed := force
	if hs != nil {
		changed = changed || hs.GetTerm() != st.hs.GetTerm() || hs.GetVote() != st.hs.GetVote()
		st.hs = proto.Clone(hs).(*pb.HardState)
	}
	g.st.mu.Unlock()
	if !changed {
		return nil
	}
	return g.saveState()
}

func (g *Group) saveState() error {
	g.st.mu.Lock()
	defer g.st.mu.Unlock()
	if err := g.st.st.save(g.cfg.FS, g.cfg.Dir); err != nil {
		return err
	}
	g.saved, g.savedAt = g.st.st.hs.GetCommit(), g.cfg.Now()
	return nil
}

// saveCommit saves the commit index when it moved and CommitSaveInterval
// passed since the last save (always, with now).
func (g *Group) saveCommit(now bool) {
	if g.failed != nil || g.st.st.hs.GetCommit() == g.saved {
		return
	}
	if !now && g.cfg.Now().Sub(g.savedAt) < g.cfg.CommitSaveInterval {
		return
	}
	if err := g.saveState(); err != nil {
		g.cfg.Logger.Warn("replica: saving the commit index failed; raft learns it again", "dir", g.cfg.Dir, "err", err)
	}
}

// apply tells the owner of the committed entries, applies membership
// changes, and answers the proposals they complete.
func (g *Group) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	var events []segment.Record
	for _, e := range ents {
		switch e.GetType() {
		case pb.EntryType_EntryNormal:
			if len(e.Data) == 0 {
				continue // a term's empty first entry
			}
			r, err := recordOf(e)
			if err != nil {
				return err
			}
			events = append(events, r)
		case pb.EntryType_EntryConfChange, pb.EntryType_EntryConfChangeV2:
			if err := g.applyConfChange(e); err != nil {
				return err
			}
		}
	}
	first, last := ents[0].GetIndex(), ents[len(ents)-1].GetIndex()
	g.applied = last
	g.cfg.Apply(events, last)
	if g.leader {
		g.props.committed(last-1, func(off uint64) uint64 {
			if off+1 >= first && off+1 <= last { // ents are contiguous
				return ents[off+1-first].GetTerm()
			}
			return g.st.termAt(off + 1)
		})
	}
	g.st.forget(last)
	return nil
}

func (g *Group) applyConfChange(e *pb.Entry) error {
	var cc pb.ConfChangeI
	if e.GetType() == pb.EntryType_EntryConfChange {
		var c pb.ConfChange
		if err := proto.Unmarshal(e.Data, &c); err != nil {
			return fmt.Errorf("replica: conf change %d: %w", e.GetIndex(), err)
		}
		cc = &c
	} else {
		var c pb.ConfChangeV2
		if err := proto.Unmarshal(e.Data, &c); err != nil {
			return fmt.Errorf("replica: conf change %d: %w", e.GetIndex(), err)
		}
		cc = &c
	}
	cs := g.rn.ApplyConfChange(cc)
	g.st.mu.Lock()
	g.st.st.cs = cs
	g.st.mu.Unlock()
	return g.saveState()
}

// slowWrite is how long a Ready's write and sync may take before the
// replica says so: a leader's quorum acks wait on it (or on a follower's),
// and a disk that stalls shows nowhere else.
const slowWrite = 100 * time.Millisecond

// slowWrites logs writes that took slowWrite or longer, at most one line a
// second, with how many it left out.
type slowWrites struct {
	loggedAt   time.Time
	suppressed int
}

func (w *slowWrites) note(log *slog.Logger, took time.Duration, entries int) {
	if took < slowWrite {
		return
	}
	now := time.Now()
	if now.Sub(w.loggedAt) < time.Second {
		w.suppressed++
		return
	}
	log.Warn("replica: slow log write and sync", "took", took.Round(time.Millisecond), "entries", entries, "slow_writes_not_logged", w.suppressed)
	w.loggedAt, w.suppressed = now, 0
}
