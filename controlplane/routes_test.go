package controlplane

import (
	"cmp"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
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

// The document's schemas of the bodies list exactly the JSON fields of the
// Go types that carry them, so that a new field cannot go undocumented.
func TestOpenAPISchemasMatchBodies(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openapiJSON, &doc))
	for name, v := range map[string]any{
		"Stream": api.Stream{}, "Member": cluster.Member{}, "RegisterRequest": api.RegisterRequest{},
		"Assignment": cluster.Assignment{}, "Placement": cluster.Placement{},
	} {
		schema, ok := doc.Components.Schemas[name]
		require.True(t, ok, "no schema %s", name)
		var documented []string
		for p := range schema.Properties {
			documented = append(documented, p)
		}
		slices.Sort(documented)
		require.Equal(t, jsonFields(reflect.TypeOf(v)), documented, "schema %s", name)
	}
}

// jsonFields lists the JSON names of t's fields, embedded structs' included,
// sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			out = append(out, jsonFields(f.Type)...)
		case name != "-" && f.IsExported():
			out = append(out, cmp.Or(name, f.Name))
		}
	}
	slices.Sort(out)
	return out
}
