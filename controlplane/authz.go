package controlplane

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// Actions an Authorizer is asked about. The manage actions are the
// published Felix's RBAC names (and auth/'s); the view actions cover
// reading and listing, and watch covers the snapshot and changes feed,
// which span every tenant and are meant for brokers.
const (
	ActionTenantManage    = "tenant.manage"
	ActionTenantView      = "tenant.view"
	ActionNamespaceManage = "ns.manage"
	ActionNamespaceView   = "ns.view"
	ActionStreamManage    = "stream.manage"
	ActionStreamView      = "stream.view"
	ActionCacheManage     = "cache.manage"
	ActionCacheView       = "cache.view"
	ActionWatch           = "controlplane.watch"
	// ActionTenantKeys rotates a tenant's Felix signing keys.
	ActionTenantKeys = "tenant.keys"
	// ActionClusterNode registers a broker, keeps its lease alive and
	// makes it leave: the node credential's permission.
	ActionClusterNode = "cluster.node"
	// ActionClusterView reads the members and the placement: any valid
	// Felix token of the cluster may.
	ActionClusterView = "cluster.view"
	// ActionNodeMint mints a node credential (POST /v1/token/node).
	ActionNodeMint = "cluster.node.mint"
	// ActionClusterManage moves a replicated shard's replicas or its
	// preferred leader: the operator's.
	ActionClusterManage = "cluster.manage"
)

// Authorizer decides whether a request may perform action on resource.
// Resources are written "kind:path" as the broker writes them:
// "tenant:t1", "namespace:t1/ns", "stream:t1/ns/orders",
// "cache:t1/ns/sessions"; a listing names its collection with a final "*"
// ("stream:t1/ns/*", "tenant:*"); the feed is "cluster:*".
//
// It returns nil to allow, an error matching ErrUnauthenticated (401) when
// the credentials are missing or invalid, or one matching ErrForbidden (403)
// when they are valid but do not grant the action. Any other error refuses
// the request with 500: an authorizer that cannot decide never allows.
type Authorizer interface {
	Authorize(r *http.Request, action, resource string) error
}

// Authenticator is what an Authorizer may add: whether the request's
// credential is valid at all, whatever it may do. Handlers whose resource
// is named in the request body ask it before they read the body, so an
// unauthenticated caller learns nothing about what it sent (a 401, never a
// 400 naming a field) and costs no decoding. An Authorizer without it is
// asked only after the body was read.
type Authenticator interface {
	Authenticate(r *http.Request) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(r *http.Request, action, resource string) error

// Authorize implements Authorizer.
func (f AuthorizerFunc) Authorize(r *http.Request, action, resource string) error {
	return f(r, action, resource)
}

// DenyAll refuses every request. It is what a Server uses when
// Config.Authorizer is nil, so that no configuration mistake leaves the
// admin API open.
type DenyAll struct{}

// Authorize implements Authorizer.
func (DenyAll) Authorize(*http.Request, string, string) error {
	return Unauthenticated("this listener has no authorizer configured: every protected request is refused")
}

// MinBootstrapTokenLen is the shortest bootstrap token accepted: 16 bytes
// of a random token are beyond guessing.
const MinBootstrapTokenLen = 16

// BootstrapAuthorizer admits requests that carry the day-0 bootstrap token
// as "Authorization: Bearer <token>", for any action. It exists to create
// the first tenants before any identity is configured; serve it on its own
// listener (loopback, or a network only operators reach), never on the
// listener brokers and clients use.
type BootstrapAuthorizer struct {
	digest [sha256.Size]byte
}

// NewBootstrapAuthorizer returns an authorizer for token (surrounding
// white space, as a token file's final newline, is ignored).
func NewBootstrapAuthorizer(token string) (*BootstrapAuthorizer, error) {
	token = strings.TrimSpace(token)
	if len(token) < MinBootstrapTokenLen {
		return nil, fmt.Errorf("%w: bootstrap token is %d bytes; at least %d are required", ErrInvalid, len(token), MinBootstrapTokenLen)
	}
	return &BootstrapAuthorizer{digest: sha256.Sum256([]byte(token))}, nil
}

// Authorize implements Authorizer. The presented token is hashed before the
// constant-time comparison so that neither its content nor its length
// shows in the timing.
func (a *BootstrapAuthorizer) Authorize(r *http.Request, _, _ string) error {
	tok, err := bearer(r)
	if err != nil {
		return err
	}
	got := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(got[:], a.digest[:]) != 1 {
		return Unauthenticated("bearer token is not the bootstrap token")
	}
	return nil
}

// Authenticate implements Authenticator.
func (DenyAll) Authenticate(r *http.Request) error { return DenyAll{}.Authorize(r, "", "") }

// Authenticate implements Authenticator: the bootstrap token is valid for
// every action.
func (a *BootstrapAuthorizer) Authenticate(r *http.Request) error { return a.Authorize(r, "", "") }

// bearer extracts the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", Unauthenticated("missing Authorization header: want \"Bearer <token>\"")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", Unauthenticated("Authorization header is not \"Bearer <token>\"")
	}
	return strings.TrimSpace(tok), nil
}
