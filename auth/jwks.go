package auth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FetcherConfig configures a Fetcher. The zero value gives the documented
// defaults.
type FetcherConfig struct {
	// Client does the HTTP GETs. Nil means a client with Timeout. A
	// caller-supplied client should carry its own timeout.
	Client *http.Client
	// Timeout bounds one fetch, connect to last byte. Default 5s.
	Timeout time.Duration
	// MinRefreshInterval is the rate limit: at most one fetch attempt per
	// JWKS URL per interval, whatever triggers it (unknown kid, expiry,
	// retry after a failure). A token with a random kid must not turn
	// into a request to the IdP. Default 30s.
	MinRefreshInterval time.Duration
	// DefaultTTL is how long keys stay fresh when the response has no
	// usable Cache-Control max-age. Default 1h (the published Felix).
	DefaultTTL time.Duration
	// MinTTL and MaxTTL bound a max-age from the server: a max-age=0 must
	// not make every verification fetch, and a year-long one must not
	// outlive a rotation we were never told about. Defaults 1m and 24h.
	MinTTL, MaxTTL time.Duration
	// MaxBodyBytes bounds a JWKS response. Default 1 MiB.
	MaxBodyBytes int64
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives fetch failures served from cache. Nil discards.
	Logger *slog.Logger
}

func (c FetcherConfig) withDefaults() FetcherConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Timeout, 5*time.Second)
	def(&c.MinRefreshInterval, 30*time.Second)
	def(&c.DefaultTTL, time.Hour)
	def(&c.MinTTL, time.Minute)
	def(&c.MaxTTL, 24*time.Hour)
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.Timeout}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c FetcherConfig) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", c.Timeout}, {"MinRefreshInterval", c.MinRefreshInterval},
		{"DefaultTTL", c.DefaultTTL}, {"MinTTL", c.MinTTL}, {"MaxTTL", c.MaxTTL}} {
		if d.v < 0 {
			return reject(ErrConfig, "FetcherConfig.%s is negative (%s)", d.name, d.v)
		}
	}
	if c.MinTTL > c.MaxTTL {
		return reject(ErrConfig, "FetcherConfig.MinTTL %s exceeds MaxTTL %s", c.MinTTL, c.MaxTTL)
	}
	if c.MaxBodyBytes < 0 {
		return reject(ErrConfig, "FetcherConfig.MaxBodyBytes is negative")
	}
	return nil
}

// Fetcher fetches and caches JSON Web Key Sets by URL. It is the only code in
// the package that reaches the network.
//
// Design: one entry per URL holds the last good key set, its freshness, and
// the time and result of the last attempt. A lookup that needs the network
// (nothing cached, stale, or unknown kid) becomes a fetch only if the last
// attempt on that URL is older than MinRefreshInterval; concurrent callers
// share one in-flight fetch, run in the first caller's goroutine
// (no background goroutines to own or stop). A failed fetch never discards
// the cached keys: an IdP outage degrades to "no new keys", not "no logins".
// Rejected alternative: a background refresher per URL; it needs a lifetime
// and Close, and fetches keys nobody asks for.
type Fetcher struct {
	cfg FetcherConfig

	mu struct {
		sync.Mutex
		entries map[string]*jwksEntry
	}
}

type jwksEntry struct {
	keys        map[string]Key // by kid; empty until a fetch succeeds
	fresh       time.Time      // keys are fresh until then
	lastAttempt time.Time
	lastErr     error     // of the last attempt, nil if it succeeded
	inflight    *jwksCall // non-nil while a fetch runs
}

// jwksCall is one in-flight fetch; done closes when it has been applied to
// the entry.
type jwksCall struct {
	done chan struct{}
}

// NewFetcher returns a Fetcher.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Fetcher{cfg: cfg.withDefaults()}
	f.mu.entries = make(map[string]*jwksEntry)
	return f, nil
}

// Key returns the key with kid from the JWKS at url, fetching or refreshing
// the set when it is missing, stale or lacks kid, and the rate limit allows.
// Errors wrap ErrUnknownKey (a good set is known and lacks kid) or
// ErrJWKSUnavailable (the set, or the refresh that might have brought kid,
// failed).
func (f *Fetcher) Key(ctx context.Context, url, kid string) (Key, error) {
	now := f.cfg.Now()
	f.mu.Lock()
	e := f.mu.entries[url]
	if e == nil {
		e = &jwksEntry{}
		f.mu.entries[url] = e
	}
	if k, ok := e.keys[kid]; ok && !now.After(e.fresh) {
		f.mu.Unlock()
		return k, nil
	}
	call, lead, limited := f.joinLocked(e, now)
	f.mu.Unlock()

	var gaveUp error
	if lead {
		f.run(ctx, url, e, call)
	} else if call != nil {
		select {
		case <-call.done:
		case <-ctx.Done():
			gaveUp = ctx.Err()
		}
	}

	f.mu.Lock()
	k, ok := e.keys[kid]
	n, lastErr := len(e.keys), e.lastErr
	f.mu.Unlock()
	switch {
	case ok:
		// Possibly stale, possibly after a failed refresh: a key the
		// IdP published is still the best answer we have.
		return k, nil
	case gaveUp != nil:
		return Key{}, reject(ErrJWKSUnavailable, "%s: gave up waiting for the fetch: %v", url, gaveUp)
	case lastErr != nil && n == 0:
		return Key{}, reject(ErrJWKSUnavailable, "%v (no cached keys%s)", lastErr, limited)
	case lastErr != nil:
		return Key{}, reject(ErrJWKSUnavailable, "kid %q not among %d cached keys and the refresh failed: %v%s", kid, n, lastErr, limited)
	}
	return Key{}, reject(ErrUnknownKey, "kid %q not in the JWKS at %s (%d keys%s)", kid, url, n, limited)
}

// joinLocked decides how this lookup may use the network: join the
// in-flight fetch, lead a new one, or neither because of the rate limit (the
// returned text then says so, for the error message).
func (f *Fetcher) joinLocked(e *jwksEntry, now time.Time) (call *jwksCall, lead bool, limited string) {
	if e.inflight != nil {
		return e.inflight, false, ""
	}
	if since := now.Sub(e.lastAttempt); !e.lastAttempt.IsZero() && since < f.cfg.MinRefreshInterval {
		return nil, false, fmt.Sprintf("; refresh rate-limited: last attempt %s ago, next in %s",
			since.Round(time.Millisecond), (f.cfg.MinRefreshInterval - since).Round(time.Millisecond))
	}
	e.lastAttempt = now
	e.inflight = &jwksCall{done: make(chan struct{})}
	return e.inflight, true, ""
}

// run performs the fetch for every caller sharing call and applies the result.
func (f *Fetcher) run(ctx context.Context, url string, e *jwksEntry, call *jwksCall) {
	// The fetch serves every waiter, so the leader's cancellation must not
	// fail theirs; Timeout still bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.Timeout)
	defer cancel()
	keys, ttl, err := f.fetch(ctx, url)

	f.mu.Lock()
	defer f.mu.Unlock()
	e.inflight = nil
	close(call.done)
	if err != nil {
		e.lastErr = err
		if len(e.keys) > 0 {
			f.cfg.Logger.Warn("auth: JWKS refresh failed, serving cached keys",
				"url", url, "cached_keys", len(e.keys), "err", err)
		}
		return
	}
	e.keys, e.lastErr = keys, nil
	e.fresh = f.cfg.Now().Add(ttl)
}

// fetch GETs and parses one JWKS. Its errors say what went wrong precisely
// enough for an operator to fix the IdP configuration without a packet trace.
func (f *Fetcher) fetch(ctx context.Context, url string) (map[string]Key, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s: HTTP status %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: reading body: %w", url, err)
	}
	if int64(len(body)) > f.cfg.MaxBodyBytes {
		return nil, 0, fmt.Errorf("GET %s: body exceeds %d bytes", url, f.cfg.MaxBodyBytes)
	}
	keys, skipped, err := ParseJWKS(body)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	for _, s := range skipped {
		f.cfg.Logger.Info("auth: JWKS key skipped", "url", url, "reason", s)
	}
	return keys, f.ttl(resp.Header.Get("Cache-Control")), nil
}

// ttl reads max-age from Cache-Control and clamps it to [MinTTL, MaxTTL];
// no-store and no-cache mean MinTTL (we must cache something, or every token
// fetches).
func (f *Fetcher) ttl(cacheControl string) time.Duration {
	ttl := f.cfg.DefaultTTL
	for _, d := range strings.Split(cacheControl, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "no-store" || d == "no-cache" {
			return f.cfg.MinTTL
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			if secs, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64); err == nil && secs >= 0 {
				ttl = time.Duration(min(secs, int64(f.cfg.MaxTTL/time.Second))) * time.Second
			}
		}
	}
	return min(max(ttl, f.cfg.MinTTL), f.cfg.MaxTTL)
}

// Forget drops everything cached for url, e.g. when a tenant is deleted, so
// the Fetcher's memory follows the set of URLs in use. A fetch in flight for
// url completes into the forgotten entry and is discarded with it.
func (f *Fetcher) Forget(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mu.entries, url)
}
