package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/felixmq/felix/controlplane/api"
)

// resource is what the generic handlers need of a tenant, namespace,
// stream or cache (through a pointer).
type resource interface {
	ref() Ref
	validate() error
	// bindPath fills the parent names from the URL, or checks that the
	// body's agree with it.
	bindPath(parent []string) error
	setRevision(int64)
	getRevision() int64
}

func (t *tenantRes) bindPath([]string) error { return nil }
func (n *namespaceRes) bindPath(p []string) error {
	return samePath("tenant", &n.Tenant, p[0])
}
func (s *streamRes) bindPath(p []string) error {
	if err := samePath("tenant", &s.Tenant, p[0]); err != nil {
		return err
	}
	return samePath("namespace", &s.Namespace, p[1])
}
func (c *cacheRes) bindPath(p []string) error {
	if err := samePath("tenant", &c.Tenant, p[0]); err != nil {
		return err
	}
	return samePath("namespace", &c.Namespace, p[1])
}

func (t *tenantRes) setRevision(r int64)    { t.Revision = r }
func (n *namespaceRes) setRevision(r int64) { n.Revision = r }
func (s *streamRes) setRevision(r int64)    { s.Revision = r }
func (c *cacheRes) setRevision(r int64)     { c.Revision = r }
func (t *tenantRes) getRevision() int64     { return t.Revision }
func (n *namespaceRes) getRevision() int64  { return n.Revision }
func (s *streamRes) getRevision() int64     { return s.Revision }
func (c *cacheRes) getRevision() int64      { return c.Revision }

// kindAPI describes one kind's endpoints.
type kindAPI struct {
	kind           Kind
	manage, view   string // the Authorizer actions
	collectionPath string // URL of the collection, with {tenant}, {namespace}
}

// wildcards are the URL path wildcards of the hierarchy, top down.
var wildcards = []string{"tenant", "namespace"}

// pathSegments reads and validates the first n hierarchy names of the URL:
// the parent's (n = depth-1) or the resource's own (n = depth).
func pathSegments(r *http.Request, k Kind, n int) ([]string, error) {
	names := append(wildcards[:depth(k)-1:depth(k)-1], string(k))
	segs := make([]string, 0, n)
	for _, w := range names[:n] {
		v := r.PathValue(w)
		if err := ValidName(w, v); err != nil {
			return nil, err
		}
		segs = append(segs, v)
	}
	return segs, nil
}

func resourceName(k Kind, path string) string { return string(k) + ":" + path }

func (s *Server) authorize(r *http.Request, action, resource string) error {
	return s.cfg.Authorizer.Authorize(r, action, resource)
}

// authenticate refuses a request whose credential is not valid at all,
// before its body is read (Authenticator).
func (s *Server) authenticate(r *http.Request) error {
	if a, ok := s.cfg.Authorizer.(Authenticator); ok {
		return a.Authenticate(r)
	}
	return nil
}

// create handles POST on a collection. The body is decoded before the
// authorization check because the resource's own name, which fine-grained
// permissions may name, is in the body; the credential is authenticated
// before that.
func create[T any, P interface {
	*T
	resource
}](s *Server, api kindAPI, defaults T) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		parent, err := pathSegments(r, api.kind, depth(api.kind)-1)
		if err != nil {
			return err
		}
		if err := s.authenticate(r); err != nil {
			return err
		}
		v := defaults
		p := P(&v)
		if err := s.decodeBody(w, r, p); err != nil {
			return err
		}
		if p.getRevision() != 0 {
			return invalid("revision is assigned by the server; leave it out")
		}
		if err := p.bindPath(parent); err != nil {
			return err
		}
		if err := s.authorize(r, api.manage, resourceName(api.kind, p.ref().Path)); err != nil {
			return err
		}
		if err := p.validate(); err != nil {
			return err
		}
		if err := s.admit(r.Context(), p); err != nil {
			return err
		}
		if err := s.servable(p); err != nil {
			return err
		}
		value, err := json.Marshal(p)
		if err != nil {
			return err
		}
		rev, err := s.store.Create(r.Context(), p.ref(), value)
		if err != nil {
			return err
		}
		p.setRevision(rev)
		s.afterCreate(r, p.ref())
		w.Header().Set("Location", "/v1/"+itemURL(p.ref()))
		return writeJSON(w, http.StatusCreated, p)
	}
}

// itemURL is the API path of a resource below /v1/.
func itemURL(ref Ref) string {
	segs := strings.Split(ref.Path, "/")
	kinds := []Kind{KindTenant, KindNamespace, ref.Kind}
	var b strings.Builder
	for i, seg := range segs {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(plural(kinds[i]) + "/" + seg)
	}
	return b.String()
}

// get handles GET on one resource.
func get[T any, P interface {
	*T
	resource
}](s *Server, api kindAPI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		segs, err := pathSegments(r, api.kind, depth(api.kind))
		if err != nil {
			return err
		}
		ref := Ref{Kind: api.kind, Path: strings.Join(segs, "/")}
		if err := s.authorize(r, api.view, resourceName(api.kind, ref.Path)); err != nil {
			return err
		}
		it, err := s.store.Get(r.Context(), ref)
		if err != nil {
			return err
		}
		v, err := decodeItem[T, P](it)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, v)
	}
}

func decodeItem[T any, P interface {
	*T
	resource
}](it Item) (P, error) {
	p := P(new(T))
	if err := json.Unmarshal(it.Value, p); err != nil {
		return nil, fmt.Errorf("controlplane: stored %s is not valid: %w", it.Ref, err)
	}
	p.setRevision(it.Revision)
	return p, nil
}

// list handles GET on a collection. A collection whose parent does not
// exist is a 404, not an empty list: a typo in a namespace must not look
// like an empty namespace.
func list[T any, P interface {
	*T
	resource
}](s *Server, api kindAPI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		parent, err := pathSegments(r, api.kind, depth(api.kind)-1)
		if err != nil {
			return err
		}
		parentPath := strings.Join(parent, "/")
		if err := s.authorize(r, api.view, resourceName(api.kind, joinPath(parentPath, "*"))); err != nil {
			return err
		}
		if len(parent) > 0 {
			pref := Ref{Kind: Kinds[len(parent)-1], Path: parentPath} // tenant or namespace
			if _, err := s.store.Get(r.Context(), pref); err != nil {
				return err
			}
		}
		items, rev, err := s.store.List(r.Context(), api.kind, parentPath)
		if err != nil {
			return err
		}
		out := make([]P, 0, len(items))
		for _, it := range items {
			v, err := decodeItem[T, P](it)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return writeJSON(w, http.StatusOK, map[string]any{plural(api.kind): out, "revision": rev})
	}
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "/" + name
}

// remove handles DELETE on one resource.
func (s *Server) remove(k kindAPI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		segs, err := pathSegments(r, k.kind, depth(k.kind))
		if err != nil {
			return err
		}
		ref := Ref{Kind: k.kind, Path: strings.Join(segs, "/")}
		if err := s.authorize(r, k.manage, resourceName(k.kind, ref.Path)); err != nil {
			return err
		}
		rev, err := s.store.Delete(r.Context(), ref)
		if err != nil {
			return err
		}
		if ref.Kind == KindTenant {
			if err := s.tokens.forget(r.Context(), ref.Path); err != nil {
				// The tenant is gone, so its keys verify nothing
				// (PublicKey checks the tenant); a leftover is removed
				// when the name is reused.
				s.cfg.Logger.Warn("deleting tenant keys", "request_id", requestID(r), "tenant", ref.Path, "err", err)
			}
		}
		return writeJSON(w, http.StatusOK, api.Deleted{Ref: ref, Revision: rev})
	}
}

// admit refuses a resource the cluster cannot hold as it is: a replicated
// stream needs as many live brokers as replicas, since Place leaves its
// shards unassigned until they are. A control plane whose store keeps no
// membership has none. Brokers may come and go after the check; the
// shards then wait unassigned for enough of them.
func (s *Server) admit(ctx context.Context, p resource) error {
	st, ok := p.(*streamRes)
	if !ok || st.Replicas <= 1 {
		return nil
	}
	live := 0
	if s.placer != nil {
		ms, err := s.placer.members.Members(ctx)
		if err != nil {
			return err
		}
		live = len(ms)
	}
	if live < st.Replicas {
		are := "brokers are"
		if live == 1 {
			are = "broker is"
		}
		return invalid("stream needs %d replicas; %d %s live", st.Replicas, live, are)
	}
	return nil
}

// afterCreate gives a new tenant fresh Felix signing keys, replacing any
// left by an earlier tenant of the same name so that its tokens cannot
// verify for this one. A failure is logged, not returned: the tenant
// exists, and its keys are created on first use (Tokens.syncKeys).
func (s *Server) afterCreate(r *http.Request, ref Ref) {
	if ref.Kind != KindTenant {
		return
	}
	if err := s.tokens.resetKeys(r.Context(), ref.Path); err != nil {
		s.cfg.Logger.Warn("creating tenant keys", "request_id", requestID(r), "tenant", ref.Path, "err", err)
	}
}

// servable asks Config.CheckStream or CheckCache whether r can be served.
func (s *Server) servable(r resource) error {
	var err error
	switch r := r.(type) {
	case *streamRes:
		if s.cfg.CheckStream != nil {
			err = s.cfg.CheckStream(api.Stream(*r))
		}
	case *cacheRes:
		if s.cfg.CheckCache != nil {
			err = s.cfg.CheckCache(api.Cache(*r))
		}
	}
	if err != nil {
		return invalid("%s", err.Error())
	}
	return nil
}
