package broker

import (
	"fmt"
	"sync"
	"time"
)

// pump is the group's one background goroutine: it expires visibility
// timeouts, wakes members when records commit, and persists the state
// whenever acks changed it, one write for every ack made meanwhile.
func (g *groupShard) pump() {
	defer close(g.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-g.kick:
		case <-timer.C:
		case <-g.stop:
			g.persist(true)
			return
		}
		g.mu.Lock()
		inflight := len(g.mu.ledger.inflight)
		next, dead := g.mu.ledger.expire(time.Now())
		g.sh.b.metrics.features.groupExpired.Add(uint64(inflight - len(g.mu.ledger.inflight)))
		if dead {
			g.mu.seq++
		}
		g.broadcastLocked()
		g.mu.Unlock()
		g.persist(false)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
	}
}

// persist writes the state if acks changed it since the last write (or, at
// close, if records were delivered since), then completes the acks that
// write covers.
func (g *groupShard) persist(closing bool) {
	g.mu.Lock()
	seq := g.mu.seq
	if seq == g.mu.durableSeq && !(closing && g.mu.ledger.delivered != g.mu.savedDelivered) {
		g.mu.Unlock()
		return
	}
	st := g.mu.ledger.state()
	g.mu.Unlock()
	err := saveGroupState(g.fs, g.path, st)
	if err != nil {
		g.b.log.Error("queue state write failed", "stream", g.key.stream.String(), "shard", g.key.shard, "group", g.key.group, "err", err)
		err = fmt.Errorf("queue: persisting group %s: %w", g.key.group, err)
	}
	g.mu.Lock()
	var done []ackWaiter
	if err == nil {
		g.mu.durableSeq, g.mu.savedDelivered = seq, st.Delivered
	}
	keep := g.mu.waiters[:0]
	for _, w := range g.mu.waiters {
		if w.seq <= seq {
			done = append(done, w)
		} else {
			keep = append(keep, w)
		}
	}
	g.mu.waiters = keep
	g.mu.Unlock()
	if len(done) > 0 {
		// Replies go through each control stream's writer, which blocks
		// while its client leaves 1 MiB of replies unread; that must not
		// stall this group's timeouts and writes, so they are sent from a
		// goroutine of their own, which ends as soon as each send returns
		// (at the latest when those streams close).
		go func() {
			for _, w := range done {
				w.done(err)
			}
		}()
	}
}

// close stops the pump after a final write; members must be gone.
func (g *groupShard) close() {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return
	}
	g.mu.closed = true
	g.broadcastLocked()
	g.mu.Unlock()
	close(g.stop)
	<-g.done
}

// groupSet holds the broker's consumer groups, opened on first use and
// kept until the broker closes.
type groupSet struct {
	mu struct {
		sync.Mutex
		m      map[groupKey]*groupShard
		closed bool
	}
}

func (gs *groupSet) get(b *Broker, k groupKey, sh *shard) (*groupShard, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.mu.closed {
		return nil, ErrDraining
	}
	if g := gs.mu.m[k]; g != nil {
		return g, nil
	}
	g, err := openGroup(b, k, sh)
	if err != nil {
		return nil, err
	}
	if gs.mu.m == nil {
		gs.mu.m = map[groupKey]*groupShard{}
	}
	gs.mu.m[k] = g
	return g, nil
}

// closeAll persists and stops every group, before the logs close.
func (gs *groupSet) closeAll() {
	gs.mu.Lock()
	gs.mu.closed = true
	groups := gs.mu.m
	gs.mu.m = nil
	gs.mu.Unlock()
	for _, g := range groups {
		g.close()
	}
}
