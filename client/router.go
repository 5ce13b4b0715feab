package client

import (
	"sync"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// maxPendingEventStreams bounds event streams whose subscription the client
// has not registered yet (the hello can overtake the `subscribed` reply).
const maxPendingEventStreams = 1024

type eventStream struct {
	str *quic.ReceiveStream
	fr  *frameio.Reader
}

// attacher is what owns an event stream: a Subscription, a roster watch or
// a queue consumer (their ids share the broker's subscription id space).
type attacher interface{ attach(es eventStream) }

// router accepts the broker's event streams and hands each to its owner by
// the id in its event_stream_hello.
type router struct {
	s  *session
	mu struct {
		sync.Mutex
		subs    map[uint64]attacher
		pending map[uint64]eventStream
	}
}

func (r *router) init(s *session) {
	r.s = s
	r.mu.subs = map[uint64]attacher{}
	r.mu.pending = map[uint64]eventStream{}
}

func (r *router) run() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		str, err := r.s.qc.AcceptUniStream(r.s.qc.Context())
		if err != nil {
			r.mu.Lock()
			for id, es := range r.mu.pending {
				es.str.CancelRead(0)
				delete(r.mu.pending, id)
			}
			r.mu.Unlock()
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); r.accept(str) }()
	}
}

func (r *router) accept(str *quic.ReceiveStream) {
	es := eventStream{str: str, fr: frameio.NewReader(str, r.s.c.cfg.MaxFrameBytes)}
	h, payload, err := es.fr.Next()
	if err != nil || h.Flags != 0 {
		str.CancelRead(0)
		return
	}
	m, err := wire.DecodeJSON(payload)
	hello, ok := m.(*wire.EventStreamHello)
	if err != nil || !ok {
		r.s.c.cfg.Logger.Warn("event stream without hello", "err", err)
		str.CancelRead(0)
		return
	}
	r.mu.Lock()
	sub := r.mu.subs[hello.SubscriptionID]
	if sub == nil {
		if len(r.mu.pending) >= maxPendingEventStreams {
			r.mu.Unlock()
			str.CancelRead(0)
			return
		}
		r.mu.pending[hello.SubscriptionID] = es
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	sub.attach(es)
}

// register binds id to sub; a stream that arrived first is attached now.
func (r *router) register(id uint64, sub attacher) {
	r.mu.Lock()
	es, ok := r.mu.pending[id]
	delete(r.mu.pending, id)
	r.mu.subs[id] = sub
	r.mu.Unlock()
	if ok {
		sub.attach(es)
	}
}

func (r *router) forget(id uint64) {
	r.mu.Lock()
	delete(r.mu.subs, id)
	r.mu.Unlock()
}

// release unbinds id when its owner closes, and reports whether the owner
// must stop its stream itself. attachOnce is the owner's: once release
// returns the owner takes no stream any more. An owner closed before its
// event stream came has it stopped by the router when it arrives (the
// broker opens it before replying `subscribed`, so it does), and the
// broker then ends what it serves; merely forgetting id would park the
// stream with the pending ones and leave the broker's side running until
// the connection ends.
func (r *router) release(id uint64, attachOnce *sync.Once) (attached bool) {
	attached = true
	attachOnce.Do(func() { attached = false })
	r.mu.Lock()
	if attached {
		delete(r.mu.subs, id)
	} else {
		r.mu.subs[id] = streamStopper{r: r, id: id}
	}
	r.mu.Unlock()
	return attached
}

// refuse stops es, which came for an owner that already closed.
func (r *router) refuse(id uint64, es eventStream) {
	r.forget(id)
	es.str.CancelRead(0)
}

type streamStopper struct {
	r  *router
	id uint64
}

func (s streamStopper) attach(es eventStream) { s.r.refuse(s.id, es) }
