package fanout

import (
	"math"
	"time"
)

// unlimited is a take limit that no buffer reaches.
const unlimited = math.MaxInt

// takeStatus is the outcome of Queue.take.
type takeStatus uint8

const (
	taken        takeStatus = iota // a buffer was removed and returned
	empty                          // nothing queued
	tooBig                         // the head would exceed the caller's limits
	closedQueue                    // the queue is closed (and therefore empty)
	laggingQueue                   // a CatchUp queue refuses pushes (and is empty)
)

// take removes the oldest buffer if it fits within maxEvents and maxBytes
// (len of B). The limits let the batcher look at the head without taking a
// buffer it cannot send in this batch.
//
// If the queue is empty and wait is true, the caller is registered as a
// parked consumer in the same critical section, so a push that follows is
// guaranteed to signal; the caller must then call park exactly once.
func (q *Queue) take(maxEvents, maxBytes int, wait bool) (*Buffer, takeStatus) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.n == 0 {
		if q.mu.closed {
			return nil, closedQueue
		}
		if q.mu.lagging {
			return nil, laggingQueue
		}
		if wait {
			q.mu.popWaiters++
		}
		return nil, empty
	}
	head := q.mu.ring[q.mu.head]
	if head.Events > maxEvents || len(head.B) > maxBytes {
		return nil, tooBig
	}
	b := q.removeHeadLocked()
	q.delivered.Add(uint64(b.Events))
	if q.mu.pushWaiters > 0 {
		signal(q.notFull)
	}
	// Another consumer is parked and there is still work: pass the wakeup on.
	if q.mu.popWaiters > 0 && q.mu.n > 0 {
		signal(q.notEmpty)
	}
	return b, taken
}

// parkResult is why park returned.
type parkResult uint8

const (
	parkWoken     parkResult = iota // something changed; look again
	parkCancelled                   // done fired
	parkTimedOut                    // timeout fired
)

// park waits after a take(wait=true) that found the queue empty, until a
// push or close wakes it, done is closed, or timeout fires, then
// unregisters. A nil channel never fires.
func (q *Queue) park(done <-chan struct{}, timeout <-chan time.Time) parkResult {
	r := parkWoken
	select {
	case <-q.notEmpty:
	case <-q.closed:
	case <-done:
		r = parkCancelled
	case <-timeout:
		r = parkTimedOut
	}
	q.unpark()
	return r
}

// unpark undoes the registration of a take(wait=true) that ends up not
// parking (or has finished parking).
func (q *Queue) unpark() {
	q.mu.Lock()
	q.mu.popWaiters--
	q.mu.Unlock()
}
