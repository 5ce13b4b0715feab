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
	h := &handoff{
		full: make(chan *batch, c.cfg.HandoffDepth),
		free: make(chan *batch, c.cfg.HandoffDepth),
		poke: make(chan struct{}, 1),
	}
	for range c.cfg.HandoffDepth {
		h.free <- newBatch(c.cfg.BatchSize, bufSize)
	}
	done, err := c.cfg.Reader.Go(func() { c.readLoop(h) })
	if err != nil {
		return err
	}
	h.done = done
	c.handoff = h
	return nil
}

// readLoop runs on the pinned thread: recvmmsg into a free batch, hand it on.
// A read error travels in the batch; the loop ends on Close or on an error
// that leaves the socket unusable.
func (c *Conn) readLoop(h *handoff) {
	for {
		var b *batch
		select {
		case b = <-h.free:
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
		case h.full <- b:
		case <-c.closing:
			return
		}
		if err != nil && !temporary(err) {
			return
		}
	}
}

func (h *handoff) setDeadline(t time.Time) {
	h.mu.Lock()
	h.mu.deadline = t
	h.mu.Unlock()
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

func (h *handoff) deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.deadline
}

// readHandoff serves ReadBatch from the batches the pinned reader handed off.
func (c *Conn) readHandoff(ms []ipv4.Message) (int, error) {
	h := c.handoff
	for {
		if h.cur != nil {
			if !h.cur.empty() {
				return h.cur.deliver(ms, &c.st), nil
			}
			h.free <- h.cur // never blocks: free has room for every batch
			h.cur = nil
		}
		if h.fatal != nil {
			return 0, h.fatal
		}
		b, err := c.waitBatch(h)
		if err != nil {
			return 0, err
		}
		if b.err != nil {
			err := b.err
			b.err = nil
			h.free <- b
			if !temporary(err) {
				h.fatal = err
			}
			return 0, c.readFailed(err)
		}
		h.cur = b
	}
}

// waitBatch waits for the next batch, the deadline or Close.
func (c *Conn) waitBatch(h *handoff) (*batch, error) {
	for {
		select {
		case b := <-h.full:
			return b, nil
		default:
		}
		var timeout <-chan time.Time
		if dl := h.deadline(); !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return nil, c.timeoutError()
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case b := <-h.full:
			return b, nil
		case <-c.closing:
			return nil, c.closedError()
		case <-h.poke:
			// deadline moved: recompute
		case <-timeout:
			return nil, c.timeoutError()
		}
	}
}
