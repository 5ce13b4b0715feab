package replica

import "time"

// proposal is a batch the leader accepted, waiting for its place in the
// log (first, found when its entries come out of raft in a Ready) and then
// for its answer.
type proposal struct {
	data  [][]byte // entry data until stepped into raft
	size  uint64   // bytes of data
	n     int
	ack   Ack
	term  uint64 // the leader's term when raft took it
	first uint64 // offset of its first record, once placed
	// placed counts its records found so far in Ready.Entries.
	placed   int
	at       time.Time
	placedFn func(uint64)
	done     func(uint64, error)
}

// proposals are the leader's accepted batches in raft's order: each one's
// entries come out of raft in the order they went in, contiguous, at its
// term, so the head of the queue is the next data entry's owner.
type proposals struct {
	q []*proposal
	// placedUpTo is how many proposals at the head of q have all their
	// records placed.
	placedUpTo int
}

func (ps *proposals) add(p *proposal) { ps.q = append(ps.q, p) }

// place matches an appended data entry (offset, term) to the proposal it
// belongs to. An entry of a newer term than a waiting proposal means that
// proposal's entries were dropped: it is lost.
func (ps *proposals) place(offset, term uint64) {
	for ps.placedUpTo < len(ps.q) {
		p := ps.q[ps.placedUpTo]
		if term > p.term {
			ps.lose(ps.placedUpTo, ErrLeadershipLost)
			continue
		}
		if term < p.term {
			return // another leader's entry: not ours
		}
		if p.placed == 0 {
			p.first = offset
		}
		p.placed++
		if p.placed == p.n {
			ps.placedUpTo++
			if p.placedFn != nil {
				p.placedFn(p.first)
			}
		}
		return
	}
}

// persisted answers the AckLeader proposals whose records are all placed
// (and so written, and synced if required).
func (ps *proposals) persisted() {
	kept := ps.q[:0]
	keptPlaced := 0
	for i, p := range ps.q {
		if i < ps.placedUpTo && p.ack == AckLeader {
			p.done(p.first, nil)
			continue
		}
		if i < ps.placedUpTo {
			keptPlaced++
		}
		kept = append(kept, p)
	}
	clear(ps.q[len(kept):])
	ps.q, ps.placedUpTo = kept, keptPlaced
}

// committed answers the proposals wholly at or below offset (the last
// committed record) whose records kept their term: termOf gives the term of
// a committed record. A proposal whose first record was committed at
// another term was overwritten by a newer leader: lost.
func (ps *proposals) committed(last uint64, termOf func(offset uint64) uint64) {
	for ps.placedUpTo > 0 {
		p := ps.q[0]
		if p.first+uint64(p.n)-1 > last {
			return
		}
		if termOf(p.first) != p.term {
			ps.lose(0, ErrLeadershipLost)
			continue
		}
		p.done(p.first, nil)
		ps.pop()
	}
}

func (ps *proposals) pop() {
	ps.q[0] = nil
	ps.q = ps.q[1:]
	ps.placedUpTo--
}

// lose fails the proposal at i with err.
func (ps *proposals) lose(i int, err error) {
	p := ps.q[i]
	p.done(0, err)
	ps.q = append(ps.q[:i], ps.q[i+1:]...)
	if i < ps.placedUpTo {
		ps.placedUpTo--
	}
}

// failAll fails every proposal with err (leadership lost, closed).
func (ps *proposals) failAll(err error) {
	failEach(ps.q, err)
	clear(ps.q)
	ps.q, ps.placedUpTo = ps.q[:0], 0
}

// failEach answers every proposal of ps with err.
func failEach(ps []*proposal, err error) {
	for _, p := range ps {
		p.done(0, err)
	}
}

// expire fails the proposals accepted before cutoff with ErrQuorumTimeout.
func (ps *proposals) expire(cutoff time.Time) {
	for i := 0; i < len(ps.q); {
		if ps.q[i].at.Before(cutoff) {
			ps.lose(i, ErrQuorumTimeout)
			continue
		}
		i++
	}
}
