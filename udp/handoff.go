package udp

import (
	"sync"
	"time"

	"golang.org/x/net/ipv4"
)

// handoff hands batches from the pinned reader to ReadBatch. There are
// HandoffDepth batches in all, cycling reader → full → ReadBatch → free →
// reader, so the reader blocks (and the kernel buffer absorbs the burst)
// when quic-go falls behind by HandoffDepth batches.
type handoff struct {
	full chan *batch
	free chan *batch
	done <-chan struct{} // closed when the reader has exited and its thread is restored

	// poke wakes a ReadBatch waiting on the handoff when the deadline moves.
	poke chan struct{}
	mu   struct {
		sync.Mutex
		deadline time.Time
	}

	// Owned by ReadBatch's goroutine.
	cur   *batch
	fatal error
}

func (c *Conn) startReader(bufSize int) error {
	q := &handoff{
		full: make(chan *batch, c.cfg.HandoffDepth),
		free: make(chan *batch, c.cfg.HandoffDepth),
		poke: make(chan struct{}, 1),
	}
	for range c.cfg.HandoffDepth {
		q.free <- newBatch(c.cfg.BatchSize, bufSize)
	}
	done, err := c.cfg.Reader.Go(func() { c.readLoop(q) })
	if err != nil {
		return err
	}
	q.done = done
	c.q = q
	return nil
}

// readLoop runs on the pinned thread: recvmmsg into a free batch, hand it on.
// A read error travels in the batch; the loop ends on Close or on an error
// that leaves the socket unusable.
func (c *Conn) readLoop(q *handoff) {
	for {
		var b *batch
		select {
		case b = <-q.free:
		case <-c.closing:
			return
		}
		n, err := c.recv.read(b.msgs)
		if err != nil {
			select {
			case <-c.closing:
				return
			default:
			}
			b.n, b.i, b.err = 0, 0, err
		} else {
			b.load(n, &c.st)
		}
		select {
		case q.full <- b:
		case <-c.closing:
			return
		}
		if err != nil && !temporary(err) {
			return
		}
	}
}

func (q *handoff) setDeadline(t time.Time) {
	q.mu.Lock()
	q.mu.deadline = t
	q.mu.Unlock()
	select {
	case q.poke <- struct{}{}:
	default:
	}
}

func (q *handoff) deadline() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.deadline
}

func (c *Conn) readQueued(ms []ipv4.Message) (int, error) {
	q := c.q
	for {
		if q.cur != nil {
			if !q.cur.empty() {
				return q.cur.deliver(ms, &c.st), nil
			}
			q.free <- q.cur // never blocks: free has room for every batch
			q.cur = nil
		}
		if q.fatal != nil {
			return 0, q.fatal
		}
		b, err := c.waitBatch(q)
		if err != nil {
			return 0, err
		}
		if b.err != nil {
			err := b.err
			b.err = nil
			q.free <- b
			if !temporary(err) {
				q.fatal = err
			}
			return 0, c.readFailed(err)
		}
		q.cur = b
	}
}

// waitBatch waits for the next batch, the deadline or Close.
func (c *Conn) waitBatch(q *handoff) (*batch, error) {
	for {
		select {
		case b := <-q.full:
			return b, nil
		default:
		}
		var timeout <-chan time.Time
		if dl := q.deadline(); !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return nil, c.timeoutError()
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case b := <-q.full:
			return b, nil
		case <-c.closing:
			return nil, c.closedError()
		case <-q.poke:
			// deadline moved: recompute
		case <-timeout:
			return nil, c.timeoutError()
		}
	}
}
