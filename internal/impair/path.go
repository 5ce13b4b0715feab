package impair

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"time"
)

// path is one direction: its impairment, its burst-loss state, and the
// queue of delayed datagrams that its deliver goroutine sends when due.
type path struct {
	p    *Proxy
	wake chan struct{}
	mu   struct {
		sync.Mutex
		imp   Impairment
		bad   bool // Gilbert-Elliott state
		queue dueHeap
		seq   uint64
		stats Stats
	}
}

func (pa *path) init(p *Proxy) {
	pa.p = p
	pa.wake = make(chan struct{}, 1)
}

func (pa *path) set(imp Impairment) {
	pa.mu.Lock()
	pa.mu.imp = imp
	pa.mu.Unlock()
}

func (pa *path) get() Impairment {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return pa.mu.imp
}

func (pa *path) stats() Stats {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return pa.mu.stats
}

// submit decides one datagram's fate: dropped, sent now, or queued with a
// due time (copied, since the caller reuses b).
func (pa *path) submit(b []byte, send func([]byte)) {
	now := time.Now()
	if pa.p.blackHoled(now) {
		pa.drop(func(s *Stats) { s.DroppedBlackHole++ })
		return
	}
	pa.mu.Lock()
	imp := pa.mu.imp
	s := &pa.mu.stats
	switch {
	case imp.MaxDatagram > 0 && len(b) > imp.MaxDatagram:
		s.DroppedSize++
	case imp.Loss > 0 && rng() < imp.Loss:
		s.DroppedLoss++
	case pa.burstLost(imp):
		s.DroppedBurst++
	default:
		copies := 1
		if imp.Duplicate > 0 && rng() < imp.Duplicate {
			copies = 2
			s.Duplicated++
		}
		delay := pa.delay(imp)
		if delay == 0 {
			s.Relayed += uint64(copies)
			pa.mu.Unlock()
			for range copies {
				send(b)
			}
			return
		}
		s.Delayed++
		for range copies {
			pa.mu.seq++
			heap.Push(&pa.mu.queue, due{at: now.Add(delay), seq: pa.mu.seq, b: append([]byte(nil), b...), send: send})
		}
		pa.mu.Unlock()
		select {
		case pa.wake <- struct{}{}:
		default:
		}
		return
	}
	pa.mu.Unlock()
	pa.p.Dropped.Add(1)
}

func (pa *path) drop(count func(*Stats)) {
	pa.mu.Lock()
	count(&pa.mu.stats)
	pa.mu.Unlock()
	pa.p.Dropped.Add(1)
}

// burstLost steps the Gilbert-Elliott chain; under pa.mu.
func (pa *path) burstLost(imp Impairment) bool {
	g := imp.Burst
	if g.EnterBad <= 0 {
		pa.mu.bad = false
		return false
	}
	if !pa.mu.bad {
		pa.mu.bad = rng() < g.EnterBad
		return false
	}
	if rng() < g.ExitBad {
		pa.mu.bad = false
	}
	return rng() < g.LossInBad
}

// delay is this datagram's hold time; under pa.mu.
func (pa *path) delay(imp Impairment) time.Duration {
	d := imp.Delay
	if imp.Jitter > 0 {
		d += time.Duration(rand.Int64N(int64(imp.Jitter)))
	}
	if imp.Reorder > 0 && rng() < imp.Reorder {
		by := imp.ReorderBy
		if by == 0 {
			by = 5 * time.Millisecond
		}
		d += by
		pa.mu.stats.Reordered++
	}
	return d
}

// deliver sends queued datagrams when they are due.
func (pa *path) deliver() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		pa.mu.Lock()
		var ready []due
		now := time.Now()
		for pa.mu.queue.Len() > 0 && !pa.mu.queue[0].at.After(now) {
			ready = append(ready, heap.Pop(&pa.mu.queue).(due))
		}
		next := time.Hour
		if pa.mu.queue.Len() > 0 {
			next = pa.mu.queue[0].at.Sub(now)
		}
		pa.mu.stats.Relayed += uint64(len(ready))
		pa.mu.Unlock()
		for _, d := range ready {
			d.send(d.b)
		}
		t.Reset(next)
		select {
		case <-pa.p.done:
			return
		case <-pa.wake:
		case <-t.C:
		}
	}
}

// due is a held datagram.
type due struct {
	at   time.Time
	seq  uint64 // ties keep arrival order
	b    []byte
	send func([]byte)
}

type dueHeap []due

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
