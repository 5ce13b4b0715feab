package broker

import (
	"io"
	"sync"
)

// replyWriter is the single writer of a control stream. Any goroutine may
// append replies (acks complete out of order). A reply sent while nothing
// waits to be written goes out from the sending goroutine itself, if the
// stream takes it without blocking (tryWriter): the goroutine that decoded
// a publish, or the commit completer that made it durable, hands the ack
// to QUIC directly, with no goroutine to wake on the way. Otherwise the
// writer goroutine writes whatever has accumulated in one stream write, so
// pipelined acks coalesce.
//
// When more than maxPending bytes wait (the client does not read its
// replies), appenders block: the control stream's reader stops reading and
// QUIC flow control pushes back on the client.
type replyWriter struct {
	w    io.Writer
	try  tryWriter     // w, when it can write without blocking; else nil
	wake chan struct{} // cap 1: there is something to write
	room chan struct{} // cap 1: pending fell below the bound
	done chan struct{} // closed when run returns
	mu   struct {
		sync.Mutex
		pending []byte
		inline  []byte // the buffer of replies written by their sender
		writing bool   // the writer goroutine is writing what it took
		closing bool
		err     error
		// queued counts every byte ever appended, written every byte
		// handed to w; waiters are closed once written reaches their
		// position (sendWritten), or when the writer stops.
		queued, written int64
		waiters         []writtenWaiter
	}
}

type writtenWaiter struct {
	pos int64
	ch  chan struct{}
}

const maxPendingReplies = 1 << 20

// tryWriter writes all of p at once or nothing (quic.SendStream's
// TryWriteAll: ErrWouldBlock when flow control or a write in progress
// would make it wait).
type tryWriter interface{ TryWriteAll(p []byte) error }

func newReplyWriter(w io.Writer) *replyWriter {
	rw := &replyWriter{w: w, wake: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
	rw.try, _ = w.(tryWriter)
	go rw.run()
	return rw
}

// send appends one or more frames through appendFn. It returns the writer's
// error once the stream failed.
func (rw *replyWriter) send(appendFn func([]byte) []byte) error {
	rw.mu.Lock()
	for len(rw.mu.pending) > maxPendingReplies && rw.mu.err == nil && !rw.mu.closing {
		rw.mu.Unlock()
		select {
		case <-rw.room:
		case <-rw.done:
		}
		rw.mu.Lock()
	}
	defer rw.mu.Unlock()
	if rw.mu.err != nil {
		return rw.mu.err
	}
	if rw.mu.closing {
		return io.ErrClosedPipe
	}
	if rw.sendInlineLocked(appendFn) {
		return nil
	}
	n := len(rw.mu.pending)
	rw.mu.pending = appendFn(rw.mu.pending)
	rw.mu.queued += int64(len(rw.mu.pending) - n)
	notify(rw.wake)
	return nil
}

// sendInlineLocked writes the frames from the calling goroutine when
// nothing is queued or being written (so no earlier reply is overtaken)
// and the stream takes them at once; it reports whether it did. Whatever
// fails here (would block, or the stream failed) is queued instead, and
// the writer goroutine meets it as before.
func (rw *replyWriter) sendInlineLocked(appendFn func([]byte) []byte) bool {
	if rw.try == nil || len(rw.mu.pending) > 0 || rw.mu.writing {
		return false
	}
	buf := appendFn(rw.mu.inline[:0])
	rw.mu.inline = buf
	if rw.try.TryWriteAll(buf) != nil {
		rw.mu.pending = append(rw.mu.pending, buf...)
		rw.mu.queued += int64(len(buf))
		notify(rw.wake)
		return true
	}
	// Nothing was queued or in flight, so no sendWritten waiter is left
	// behind by counting these bytes written at once.
	rw.mu.queued += int64(len(buf))
	rw.mu.written += int64(len(buf))
	return true
}

// sendWritten is send, and returns a channel closed once the frames have
// been handed to the stream (or the writer stopped, or could not take
// them): for what must not be overtaken by data on another stream.
func (rw *replyWriter) sendWritten(appendFn func([]byte) []byte) <-chan struct{} {
	ch := make(chan struct{})
	if rw.send(appendFn) != nil {
		close(ch)
		return ch
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.mu.written >= rw.mu.queued || rw.mu.err != nil {
		close(ch)
		return ch
	}
	rw.mu.waiters = append(rw.mu.waiters, writtenWaiter{pos: rw.mu.queued, ch: ch})
	return ch
}

// wrote records n more bytes handed to the stream and releases the
// waiters they cover; all of them when stopping.
func (rw *replyWriter) wrote(n int, stopping bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.mu.writing = false
	rw.mu.written += int64(n)
	keep := rw.mu.waiters[:0]
	for _, w := range rw.mu.waiters {
		if stopping || w.pos <= rw.mu.written {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	clear(rw.mu.waiters[len(keep):])
	rw.mu.waiters = keep
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (rw *replyWriter) run() {
	defer close(rw.done)
	defer rw.wrote(0, true)
	var spare []byte
	for {
		<-rw.wake
		rw.mu.Lock()
		buf, closing := rw.mu.pending, rw.mu.closing
		rw.mu.pending = spare[:0]
		rw.mu.writing = len(buf) > 0
		rw.mu.Unlock()
		notify(rw.room)
		if len(buf) > 0 {
			if _, err := rw.w.Write(buf); err != nil {
				rw.mu.Lock()
				rw.mu.err = err
				rw.mu.writing = false
				rw.mu.Unlock()
				return
			}
			rw.wrote(len(buf), false)
		}
		spare = buf
		if closing {
			rw.mu.Lock()
			empty := len(rw.mu.pending) == 0
			rw.mu.Unlock()
			if empty {
				return
			}
			notify(rw.wake)
		}
	}
}

// close writes what is pending and stops the writer; it waits for both.
func (rw *replyWriter) close() error {
	rw.mu.Lock()
	rw.mu.closing = true
	rw.mu.Unlock()
	notify(rw.wake)
	<-rw.done
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.mu.err
}
