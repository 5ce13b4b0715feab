package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/cluster"
)

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// URL is the control plane's API, e.g. "http://127.0.0.1:7070".
	URL string
	// Token is any valid Felix token of the cluster (a broker's node
	// credential, a client's own token). TokenFunc, if set, is asked
	// before each request instead (a renewed credential: Agent.Token).
	Token     string
	TokenFunc func() string
	// OnChange, if set, is called with each new placement, in order, from
	// the watcher's goroutine; it must not block for long (a slow callback
	// delays the next long-poll, never skips a version's successor: the
	// next answer is whatever is current then).
	OnChange func(*cluster.Index)
	// HTTPClient sends the requests (ClientConfig.HTTPClient).
	HTTPClient *http.Client
	// Wait is each long-poll's wait_ms (default 30s); a request is
	// bounded by Wait plus RequestTimeout (default 5s).
	Wait           time.Duration
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause between failed requests
	// (defaults 100ms and 5s); it doubles with each failure in a row.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives failures; nil discards.
	Logger *slog.Logger
}

func (c WatcherConfig) withDefaults() WatcherConfig {
	if c.Wait == 0 {
		c.Wait = 30 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Watcher follows the control plane's placement by long-polling GET
// /v1/placement?after=V and keeps the newest as an *Index: Current for
// per-publish lookups, OnChange and Next for reacting to changes. It
// reconnects with backoff after failures and keeps the last placement
// meanwhile.
//
// One goroutine (pprof label goroutine=felix-cluster-watch) polls; Close
// stops it and waits.
type Watcher struct {
	cfg  WatcherConfig
	api  *Client
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
	// current is read per publish batch, so it is an atomic, not under mu.
	current atomic.Pointer[cluster.Index]
	mu      struct {
		sync.Mutex
		wake chan struct{} // closed and replaced on every new placement
	}
}

// NewWatcher starts watching. It returns at once; Next waits for the first
// placement.
func NewWatcher(cfg WatcherConfig) (*Watcher, error) {
	cfg = cfg.withDefaults()
	token := cfg.TokenFunc
	if token == nil {
		if cfg.Token == "" {
			return nil, fmt.Errorf("%w: watcher needs a token", ErrInvalid)
		}
		token = func() string { return cfg.Token }
	}
	c, err := NewClient(ClientConfig{URL: cfg.URL, Token: token, RequestTimeout: cfg.RequestTimeout, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, err
	}
	if cfg.MinBackoff < 0 || cfg.MaxBackoff < cfg.MinBackoff || cfg.Wait < 0 {
		return nil, fmt.Errorf("%w: watcher backoff [%v, %v] or wait %v", ErrInvalid, cfg.MinBackoff, cfg.MaxBackoff, cfg.Wait)
	}
	ctx, stop := context.WithCancel(context.Background())
	w := &Watcher{cfg: cfg, api: c, stop: stop, done: make(chan struct{})}
	w.mu.wake = make(chan struct{})
	go pprof.Do(ctx, pprof.Labels("goroutine", "felix-cluster-watch"), w.run)
	return w, nil
}

// Current returns the newest placement, or nil before the first.
func (w *Watcher) Current() *cluster.Index { return w.current.Load() }

// Next returns the current placement once its version differs from after
// (pass 0 for the first placement), or ctx's error.
func (w *Watcher) Next(ctx context.Context, after int64) (*cluster.Index, error) {
	for {
		w.mu.Lock()
		cur, wake := w.current.Load(), w.mu.wake
		w.mu.Unlock()
		if cur != nil && cur.Version != after {
			return cur, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops watching and waits for the goroutine. It is idempotent.
func (w *Watcher) Close() error {
	w.once.Do(func() {
		w.stop()
		<-w.done
	})
	return nil
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	backoff := w.cfg.MinBackoff
	for ctx.Err() == nil {
		p, err := w.poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.cfg.Logger.Warn("placement watch failed; retrying", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, w.cfg.MaxBackoff)
			continue
		}
		backoff = w.cfg.MinBackoff
		w.deliver(p)
	}
}

// poll asks for the placement after the current one (after=0 before the
// first: the control plane answers as soon as it has one).
func (w *Watcher) poll(ctx context.Context) (cluster.Placement, error) {
	var after int64
	if cur := w.Current(); cur != nil {
		after = cur.Version
	}
	path := fmt.Sprintf("/v1/placement?after=%d&wait_ms=%d", after, w.cfg.Wait.Milliseconds())
	var p cluster.Placement
	err := w.api.Poll(ctx, path, w.cfg.Wait, &p)
	return p, err
}

// deliver installs p if it is new and tells OnChange. A placement of
// version 0 (nothing stored yet) is not delivered.
func (w *Watcher) deliver(p cluster.Placement) {
	if cur := w.Current(); p.Version == 0 || cur != nil && cur.Version == p.Version {
		return
	}
	x := cluster.NewIndex(p)
	w.mu.Lock()
	w.current.Store(x)
	close(w.mu.wake)
	w.mu.wake = make(chan struct{})
	w.mu.Unlock()
	if w.cfg.OnChange != nil {
		w.cfg.OnChange(x)
	}
}
