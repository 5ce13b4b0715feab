package client

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// replyReader reads the replies of one control stream, on the goroutine
// that waits for them whenever it can.
//
// A reader goroutine of its own would cost every reply a goroutine
// hand-off: QUIC wakes the reader, the reader decodes the ack and wakes the
// caller, and where waking a thread is dear that is a good part of a round
// trip (docs/BENCHMARKS.md, "What limits each figure"). So reading is a
// turn, held by one goroutine at a time (a token in turn): a caller waiting
// for its reply (await) takes the turn when it is free and reads until its
// reply came, handling whatever else arrives on the way; the reader
// goroutine takes it only when kicked, and reads while replies are wanted
// that no caller waits for (wanted), or to see the stream end once the
// connection went or the stream's sending side closed (ending: our Close,
// or the broker stopping the stream, which it does whenever it ends one).
// A caller that finds the turn taken waits for its reply like before.
//
// wanted also says whether an answer is due (an acked publish pending,
// not merely the refusal a fire-and-forget batch might get): the turn
// holder is counted in the session's awaiting while one is, and the
// watchdog asks whether a silent broker died only then.
//
// frame handles one reply (on whichever goroutine holds the turn, one at a
// time) and end is told once why reading stopped (the stream's error,
// io.EOF at its end); both are the owner's, which must fail whatever still
// waits in end.
type replyReader struct {
	fr     *frameio.Reader
	frame  func(wire.Header, []byte) error
	wanted func() (read, due bool)
	end    func(error)
	ending [2]<-chan struct{} // closed when the connection, or the sending side, ended; nil: never
	// awaiting counts the turn holder while it reads for an answer (the
	// session's count, which the watchdog reads; nil: none).
	awaiting *atomic.Int32

	turn chan struct{} // holds the token while nobody reads
	kick chan struct{} // cap 1: the reader goroutine should look at wanted
	done chan struct{} // closed once reading stopped for good

	intr readInterrupt // the turn holder's
}

// deadliner interrupts a read: a caller whose context ended while it read
// gives up (readInterrupt).
type deadliner interface{ SetReadDeadline(time.Time) error }

// newReplyReader reads fr, which reads str, on the session sess (nil: a
// test's); sending is closed when the stream's sending side ends (nil:
// never).
func newReplyReader(fr *frameio.Reader, str deadliner, sess *session, sending <-chan struct{}, frame func(wire.Header, []byte) error,
	wanted func() (read, due bool), end func(error)) *replyReader {
	r := &replyReader{fr: fr, ending: [2]<-chan struct{}{nil, sending}, frame: frame, wanted: wanted, end: end,
		turn: make(chan struct{}, 1), kick: make(chan struct{}, 1), done: make(chan struct{})}
	if sess != nil {
		r.ending[0], r.awaiting = sess.qc.Context().Done(), &sess.awaiting
	}
	r.turn <- struct{}{}
	r.intr.init(str)
	return r
}

// start runs the reader goroutine, counted in wg, until reading stops.
func (r *replyReader) start(wg *sync.WaitGroup) {
	wg.Add(1)
	go func() { defer wg.Done(); r.run() }()
}

// ask makes the reader goroutine read for replies no caller waits for.
func (r *replyReader) ask() { notify(r.kick) }

func (r *replyReader) run() {
	for {
		select {
		case <-r.kick:
		case <-r.ending[0]:
		case <-r.ending[1]:
		case <-r.done:
			return
		}
		select {
		case <-r.turn:
		case <-r.done:
			return
		}
		counted := false
		for {
			read, due := r.wanted()
			if !read && !closed(r.ending[0]) && !closed(r.ending[1]) {
				break
			}
			counted = r.count(counted, due)
			if !r.readOne() {
				r.count(counted, false)
				return
			}
		}
		r.count(counted, false)
		r.release()
	}
}

// await waits until done is closed (nil) or ctx ends (its error), reading
// the stream itself while nobody else does. Reading may stop (the stream
// ended) before done is closed: the owner's end fails what waits, or
// something else answers it (an idempotent batch sent again on another
// connection); await then just waits.
func (r *replyReader) await(ctx context.Context, done <-chan struct{}) error {
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-r.turn:
		}
		r.readUntil(ctx, done)
	}
}

// readUntil reads with the turn held until done is closed, ctx ends or
// reading stops; it gives the turn back unless reading stopped.
func (r *replyReader) readUntil(ctx context.Context, done <-chan struct{}) {
	stop := r.intr.arm(ctx)
	r.count(false, true)
	ended := false
	for !closed(done) && ctx.Err() == nil {
		if ended = !r.readOne(); ended {
			break
		}
	}
	r.count(true, false)
	r.intr.disarm(stop)
	if !ended {
		r.release()
	}
}

// readOne reads and handles one reply; false when reading stopped (the
// turn is never given back then). A read that ctx interrupted stops
// nothing: the frame resumes at the next read.
func (r *replyReader) readOne() bool {
	h, payload, err := r.fr.Next()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	if err == nil {
		err = r.frame(h, payload)
	}
	if err != nil {
		r.end(err)
		close(r.done)
		return false
	}
	return true
}

// count keeps the turn holder in the session's count of goroutines
// waiting for an answer while one is due, given whether it is counted; it
// returns whether it is counted now.
func (r *replyReader) count(counted, due bool) bool {
	switch {
	case r.awaiting == nil || due == counted:
	case due:
		r.awaiting.Add(1)
	default:
		r.awaiting.Add(-1)
	}
	return due
}

// release gives the turn back; the reader goroutine takes it if replies
// are wanted that no caller is reading for.
func (r *replyReader) release() {
	r.turn <- struct{}{}
	if read, _ := r.wanted(); read {
		r.ask()
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
