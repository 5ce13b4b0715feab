package fanout

import "context"

// WaitRoom waits until ev more events would fit (and the queue is below its
// byte bound), the queue is closed (nil),
// or ctx ends (ctx.Err()). It reserves nothing: it lets a publisher learn
// before taking an offset that a Block subscriber has room, so a publish
// that cannot be admitted in time is refused whole instead of half-delivered.
// The room may be taken by a racing pusher; PushWait then waits briefly.
func (q *Queue) WaitRoom(ctx context.Context, ev int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.mu.closed && !q.roomLocked(ev, 1) {
		q.mu.pushWaiters++
		q.mu.Unlock()
		var err error
		select {
		case <-q.notFull:
		case <-q.closed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		q.mu.Lock()
		q.mu.pushWaiters--
		if err != nil {
			return err
		}
	}
	// This waiter may have taken the one wake-up signal without pushing:
	// pass it on so a parked pusher looks again.
	if q.mu.pushWaiters > 0 && q.mu.events < q.capacity && q.mu.bytes < q.maxBytes {
		signal(q.notFull)
	}
	return nil
}

// HasRoom reports whether ev more events would fit now (and the queue is
// below its byte bound). A closed queue has room: pushes to it never wait.
func (q *Queue) HasRoom(ev int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.closed || q.roomLocked(ev, 1)
}
