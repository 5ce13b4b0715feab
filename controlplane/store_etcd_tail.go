package controlplane

import (
	"context"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// tail is an EtcdStore's live copy of the recent feed.
//
// Why: etcd serves a watch that starts in the past (every page read and
// every long-poll behind the head) from its unsynced-watcher loop, which
// runs every 100 ms, so each such read would cost up to 100 ms. One watch
// started at the current revision is synced and receives every change as
// it commits; pages and waits after its base are served from memory.
// Cursors before the base (a reader far behind, or a fresh control plane)
// fall back to a watch from the cursor, which is always correct, only
// slower.
//
// Invariant: every change with base < revision <= upto is in log, in
// order. upto only grows while the watch runs; when it fails the tail stops
// and the next read starts a new one with a new base.
type tail struct {
	store *EtcdStore
	size  int
	mu    struct {
		sync.Mutex
		running bool
		closed  bool
		base    int64
		upto    int64
		log     []Change
		wake    chan struct{} // closed and replaced on every update
		cancel  context.CancelFunc
		done    chan struct{}
	}
}

func newTail(s *EtcdStore, size int) *tail {
	t := &tail{store: s, size: size}
	t.mu.wake = make(chan struct{})
	return t
}

// ensure starts the watch if it is not running.
func (t *tail) ensure(ctx context.Context) {
	t.mu.Lock()
	if t.mu.running || t.mu.closed {
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	cctx, cancel := t.store.call(ctx)
	resp, err := t.store.cli.Get(cctx, t.store.head)
	cancel()
	if err != nil {
		return // the caller's fallback reports the failure
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.running || t.mu.closed {
		return
	}
	if t.mu.cancel != nil {
		t.mu.cancel() // the previous watch ended on its own; release its context
	}
	base := resp.Header.Revision
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	wch := t.store.cli.Watch(wctx, t.store.resources, clientv3.WithPrefix(), clientv3.WithRev(base+1))
	t.mu.running, t.mu.base, t.mu.upto, t.mu.log = true, base, base, nil
	t.mu.cancel, t.mu.done = stop, make(chan struct{})
	done := t.mu.done
	go pprof.Do(context.Background(), pprof.Labels("goroutine", "felix-cp-etcd-tail"), func(context.Context) { t.run(wch, done) })
}

func (t *tail) run(wch clientv3.WatchChan, done chan struct{}) {
	defer close(done)
	for wr := range wch {
		if wr.Err() != nil || wr.Canceled {
			break
		}
		t.mu.Lock()
		for _, ev := range wr.Events {
			if c, ok := t.store.change(ev); ok {
				t.mu.log = append(t.mu.log, c)
			}
			t.mu.upto = ev.Kv.ModRevision
		}
		if drop := len(t.mu.log) - t.size; drop > 0 {
			t.mu.base = t.mu.log[drop-1].Revision
			t.mu.log = t.mu.log[drop:]
		}
		t.broadcastLocked()
		t.mu.Unlock()
	}
	t.mu.Lock()
	t.mu.running = false
	t.broadcastLocked() // waiters fall back to their own watch
	t.mu.Unlock()
}

func (t *tail) broadcastLocked() {
	close(t.mu.wake)
	t.mu.wake = make(chan struct{})
}

// catchUpWait bounds how long a read waits for the tail to receive a change
// etcd has already committed; the watch is synced, so this is normally
// well under a millisecond.
const catchUpWait = time.Second

// read returns the page after `after` up to head, or false if the tail
// cannot serve it.
func (t *tail) read(ctx context.Context, after, head int64, limit int) (Page, bool) {
	t.ensure(ctx)
	timer := time.NewTimer(catchUpWait)
	defer timer.Stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	expired := false
	for !expired && ctx.Err() == nil && t.mu.running && after >= t.mu.base && t.mu.upto < head {
		wake := t.mu.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			expired = true
		case <-ctx.Done():
		}
		t.mu.Lock()
	}
	if !t.mu.running || after < t.mu.base || t.mu.upto < head {
		return Page{}, false
	}
	log := t.mu.log
	i := sort.Search(len(log), func(i int) bool { return log[i].Revision > after })
	j := sort.Search(len(log), func(i int) bool { return log[i].Revision > head })
	page := Page{Revision: head}
	rest := log[i:j]
	if len(rest) > limit {
		rest, page.Truncated = rest[:limit], true
	}
	page.Changes = append([]Change(nil), rest...)
	return page, true
}

// wait blocks until a change after `after` is in the tail. It returns
// false if the tail cannot answer (not running, or after precedes its
// base), leaving the caller to watch etcd itself.
func (t *tail) wait(ctx context.Context, after int64) (bool, error) {
	t.ensure(ctx)
	for {
		t.mu.Lock()
		if !t.mu.running || after < t.mu.base {
			t.mu.Unlock()
			return false, nil
		}
		if t.mu.upto > after {
			t.mu.Unlock()
			return true, nil
		}
		wake := t.mu.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
}

// close stops the watch and waits for its goroutine.
func (t *tail) close() {
	t.mu.Lock()
	t.mu.closed = true
	cancel, done := t.mu.cancel, t.mu.done
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
