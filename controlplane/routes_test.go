package controlplane

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The OpenAPI document lists exactly the routes the mux serves: every
// route is documented, and every documented operation reaches a real
// route (not the 404/405 fallback).
func TestOpenAPICoversEveryRoute(t *testing.T) {
	in := newBootstrapInstance(t, nil)
	r := in.mustDo(t, http.StatusOK, "GET", "/v1/openapi.json", "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	r.decode(t, &doc)
	require.Equal(t, "3.1.0", doc.OpenAPI)

	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, rt := range in.srv.routes {
		served = append(served, rt.method+" "+rt.pattern)
	}
	slices.Sort(documented)
	slices.Sort(served)
	require.Equal(t, served, documented)

	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		req, err := http.NewRequest(method, samplePath(path), nil)
		require.NoError(t, err)
		_, pattern := in.srv.mux.Handler(req)
		require.Equal(t, op, pattern, "documented %s reaches the mux route", op)
	}
}

// Every $ref in the document resolves.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(openapiJSON, &doc))
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var cur any = doc
				for _, seg := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[seg]
				}
				require.NotNil(t, cur, "dangling $ref %s", ref)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}
