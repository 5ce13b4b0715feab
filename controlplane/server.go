package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/felixmq/felix/controlplane/api"
)

// Config configures a Server. The zero value is the documented default: a
// fresh memory store and an authorizer that refuses every protected request.
type Config struct {
	// Store holds the resources; nil creates a MemoryStore that Close
	// closes. A Store passed in belongs to the caller (several Servers may
	// share one, e.g. the main and the bootstrap listener).
	Store Store
	// Authorizer decides every protected request; nil means DenyAll.
	Authorizer Authorizer
	// Logger receives server errors; nil discards.
	Logger *slog.Logger
	// DefaultLimit and MaxLimit bound a changes page (0: 100 and 1000).
	DefaultLimit int
	MaxLimit     int
	// MaxWait bounds a long-poll's wait parameter (0: 60s).
	MaxWait time.Duration
	// MaxBodyBytes bounds a request body (0: 64 KiB).
	MaxBodyBytes int64
	// Tokens serves the token exchange, the tenant JWKS and key rotation;
	// nil makes one with defaults over Store. Share one between the
	// Servers of one process, and with its FelixTokenAuthorizer.
	Tokens *Tokens
	// OperatorTenant is the tenant node credentials belong to (POST
	// /v1/token/node); empty: none can be minted. cmd/felix-controlplane
	// sets it from FELIX_CP_OPERATOR_TENANT, as the FelixTokenAuthorizer's.
	OperatorTenant string
	// DevIssuer, when set, serves the development issuer (POST
	// /v1/token/mint: a token with chosen rights, no IdP) to the requests
	// it authorizes, whatever Authorizer says; nil answers 404. Set it to
	// the bootstrap token's authorizer on the bootstrap listener only.
	DevIssuer Authorizer
	// Metrics count requests, token exchanges and long-polls, served at
	// GET /metrics; nil makes a registry for this Server alone. Share one
	// between the Servers of one process.
	Metrics *Metrics
	// CheckStream and CheckCache, when set, may refuse a stream or cache
	// that is valid but cannot be served (a durable one where no broker
	// has a data directory): creation is answered 400 with the reason,
	// before anything is stored. The broker's embedded control plane sets
	// them.
	CheckStream func(api.Stream) error
	CheckCache  func(api.Cache) error
	// Placer keeps the cluster placement and serves the membership and
	// placement endpoints; nil makes one with defaults over Store (if it
	// implements MemberStore) that Close closes. Share one between the
	// Servers of one process.
	Placer *Placer
}

func (c Config) withDefaults() Config {
	if c.Authorizer == nil {
		c.Authorizer = DenyAll{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DefaultLimit == 0 {
		c.DefaultLimit = 100
	}
	if c.MaxLimit == 0 {
		c.MaxLimit = 1000
	}
	if c.MaxWait == 0 {
		c.MaxWait = 60 * time.Second
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 64 << 10
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.DefaultLimit < 1 || c.DefaultLimit > c.MaxLimit:
		return fmt.Errorf("%w: DefaultLimit %d not in [1, MaxLimit %d]", ErrInvalid, c.DefaultLimit, c.MaxLimit)
	case c.MaxWait < 0:
		return fmt.Errorf("%w: MaxWait %v is negative", ErrInvalid, c.MaxWait)
	case c.MaxBodyBytes < 1:
		return fmt.Errorf("%w: MaxBodyBytes %d is not positive", ErrInvalid, c.MaxBodyBytes)
	}
	return nil
}

// RequestIDHeader carries the id the server gives every request; error
// bodies repeat it, and the server's log lines name it.
const RequestIDHeader = "X-Request-Id"

// Server is the control plane's HTTP API. It is an http.Handler.
type Server struct {
	cfg       Config
	store     Store
	ownStore  bool
	tokens    *Tokens
	placer    *Placer // nil: the store keeps no membership
	ownPlacer bool
	metrics   *Metrics
	mux       *http.ServeMux
	routes    []route
	// stop ends pending long-polls when the server closes.
	stop      context.Context
	stopFunc  context.CancelFunc
	closeOnce sync.Once
}

// handlerFunc is an endpoint: it writes a success response itself and
// returns errors for the server to map onto a status and an ErrorBody.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route is one endpoint; the mux and the OpenAPI test are built from the
// same table, so the document cannot forget an endpoint.
type route struct {
	method  string
	pattern string
	handle  handlerFunc
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: cfg.Store, mux: http.NewServeMux()}
	if s.store == nil {
		ms, err := NewMemoryStore(MemoryConfig{})
		if err != nil {
			return nil, err
		}
		s.store, s.ownStore = ms, true
	}
	s.tokens = cfg.Tokens
	if s.tokens == nil {
		t, err := NewTokens(s.store, TokensConfig{})
		if err != nil {
			return nil, err
		}
		s.tokens = t
	}
	s.placer = cfg.Placer
	if _, ok := s.store.(MemberStore); ok && s.placer == nil {
		p, err := NewPlacer(s.store, PlacerConfig{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		s.placer, s.ownPlacer = p, true
	}
	s.metrics = cfg.Metrics
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	if s.placer != nil {
		s.metrics.watchPlacer(s.placer)
	}
	s.stop, s.stopFunc = context.WithCancel(context.Background())
	s.routes = s.buildRoutes()
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.pattern, s.wrap(rt.pattern, rt.handle))
	}
	s.mux.Handle("/", s.wrap("other", s.noRoute))
	// Not an API route (no JSON, no authorization: it reveals counts and
	// timings only), so not in the routes table and its OpenAPI document.
	s.mux.Handle("GET /metrics", s.metrics.Handler())
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends pending long-polls (they answer an empty page) and closes the
// store if the server created it. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stopFunc()
		if s.ownPlacer {
			s.placer.Close()
		}
		if s.ownStore {
			err = s.store.Close()
		}
	})
	return err
}

type ctxKey struct{}

// requestID returns the id wrap gave r.
func requestID(r *http.Request) string {
	id, _ := r.Context().Value(ctxKey{}).(string)
	return id
}

// wrap gives each request an id, echoes it in a header, turns a
// handler's error into the JSON error body, and counts the request under
// route.
func (s *Server) wrap(route string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		id := rand.Text()
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
		if err := h(sw, r); err != nil {
			s.writeError(sw, r, err)
		}
		s.metrics.observe(route, r.Method, sw.code, start)
	})
}

// classify maps an error onto a status and an error code.
func classify(err error) (int, string) {
	var tooBig *http.MaxBytesError
	var te *tokenError
	switch {
	case errors.As(err, &te):
		return te.status, te.code
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized, "unauthenticated"
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrParentNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed, "method_not_allowed"
	case errors.Is(err, ErrExists):
		return http.StatusConflict, "already_exists"
	case errors.Is(err, ErrNotEmpty):
		return http.StatusConflict, "not_empty"
	case errors.Is(err, ErrMoving):
		return http.StatusConflict, "moving"
	case errors.Is(err, ErrResync):
		return http.StatusGone, "resync"
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal"
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		// The caller left (a long-poll cut by its shutdown, or ours):
		// nobody reads the answer, and nothing failed.
		return
	}
	status, code := classify(err)
	body := api.ErrorBody{Code: code, Message: err.Error(), RequestID: requestID(r)}
	var resync *ResyncError
	if errors.As(err, &resync) {
		body.Revision = resync.Revision
	}
	switch status {
	case http.StatusInternalServerError:
		// The cause may name internals; the log has it under the id.
		s.cfg.Logger.Error("request failed", "request_id", body.RequestID, "method", r.Method, "path", r.URL.Path, "err", err)
		body.Message = "internal error (request " + body.RequestID + " in the control plane log)"
	case http.StatusServiceUnavailable:
		s.cfg.Logger.Warn("store unavailable", "request_id", body.RequestID, "err", err)
		w.Header().Set("Retry-After", "1")
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="felix-controlplane"`)
	}
	if status == http.StatusServiceUnavailable && code == "jwks_unavailable" {
		s.cfg.Logger.Warn("identity provider JWKS unavailable", "request_id", body.RequestID, "err", err)
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // messages quote "Bearer <token>"; this is not HTML
	return enc.Encode(v)
}

var errMethod = errors.New("controlplane: method not allowed")

// noRoute answers what no route matched: 405 with Allow when the path
// exists under another method, else 404, both as JSON errors (the mux's
// own answers are plain text).
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		return apiErr(errMethod, "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))
	}
	return apiErr(ErrNotFound, "no endpoint %s %s (see /v1/openapi.json)", r.Method, r.URL.Path)
}
