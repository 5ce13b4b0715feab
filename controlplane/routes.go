package controlplane

import (
	_ "embed"
	"net/http"
)

//go:embed openapi.json
var openapiJSON []byte

var (
	tenantAPI    = kindAPI{KindTenant, ActionTenantManage, ActionTenantView, "/v1/tenants"}
	namespaceAPI = kindAPI{KindNamespace, ActionNamespaceManage, ActionNamespaceView, "/v1/tenants/{tenant}/namespaces"}
	streamAPI    = kindAPI{KindStream, ActionStreamManage, ActionStreamView, "/v1/tenants/{tenant}/namespaces/{namespace}/streams"}
	cacheAPI     = kindAPI{KindCache, ActionCacheManage, ActionCacheView, "/v1/tenants/{tenant}/namespaces/{namespace}/caches"}
)

// buildRoutes is the table of every endpoint. openapi_test.go checks the
// OpenAPI document against it in both directions.
func (s *Server) buildRoutes() []route {
	var rs []route
	add := func(method, pattern string, h handlerFunc) {
		rs = append(rs, route{method: method, pattern: pattern, handle: h})
	}
	crud := func(api kindAPI, c, g, l handlerFunc) {
		item := api.collectionPath + "/{" + string(api.kind) + "}"
		add(http.MethodPost, api.collectionPath, c)
		add(http.MethodGet, api.collectionPath, l)
		add(http.MethodGet, item, g)
		add(http.MethodDelete, item, s.remove(api))
	}
	crud(tenantAPI, create(s, tenantAPI, tenantRes{}), get[tenantRes](s, tenantAPI), list[tenantRes](s, tenantAPI))
	crud(namespaceAPI, create(s, namespaceAPI, namespaceRes{}), get[namespaceRes](s, namespaceAPI), list[namespaceRes](s, namespaceAPI))
	// Omitted shards means one shard; an explicit 0 is refused.
	crud(streamAPI, create(s, streamAPI, streamRes{Shards: 1}), get[streamRes](s, streamAPI), list[streamRes](s, streamAPI))
	crud(cacheAPI, create(s, cacheAPI, cacheRes{}), get[cacheRes](s, cacheAPI), list[cacheRes](s, cacheAPI))
	add(http.MethodPost, "/v1/token/exchange", s.exchange)
	add(http.MethodPost, "/v1/token/node", s.mintNode)
	add(http.MethodPost, "/v1/token/mint", s.mintDev)
	add(http.MethodGet, "/v1/tenants/{tenant}/.well-known/jwks.json", s.jwks)
	add(http.MethodPost, "/v1/tenants/{tenant}/keys/rotate", s.rotate)
	add(http.MethodGet, "/v1/snapshot", s.snapshot)
	add(http.MethodGet, "/v1/changes", s.changes)
	s.clusterRoutes(add)
	add(http.MethodGet, "/v1/system/health", s.health)
	add(http.MethodGet, "/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(openapiJSON)
		return err
	})
	return rs
}

// health answers 200 when the store answers (no authorization: it is the
// probe of load balancers and supervisors, and reveals only the revision).
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	_, rev, err := s.store.List(r.Context(), KindTenant, "")
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "revision": rev})
}
