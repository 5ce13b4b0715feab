package controlplane

import (
	"strings"

	"github.com/felixmq/felix/controlplane/api"
)

// Kind, Ref, Op and Change are the API's (controlplane/api): the store
// keeps and reports resources in the terms of the changes feed.
type (
	Kind   = api.Kind
	Ref    = api.Ref
	Op     = api.Op
	Change = api.Change
)

// The resource kinds, from the top of the hierarchy down.
const (
	KindTenant    = api.KindTenant
	KindNamespace = api.KindNamespace
	KindStream    = api.KindStream
	KindCache     = api.KindCache
)

// The operations of the changes feed.
const (
	OpCreated = api.OpCreated
	OpDeleted = api.OpDeleted
)

// Kinds lists every kind in hierarchy order.
var Kinds = []Kind{KindTenant, KindNamespace, KindStream, KindCache}

// depth is the number of path segments of a kind's resources.
func depth(k Kind) int {
	switch k {
	case KindTenant:
		return 1
	case KindNamespace:
		return 2
	case KindStream, KindCache:
		return 3
	}
	return 0
}

// plural is the store key prefix and URL collection name of the kind.
func plural(k Kind) string {
	if k == KindCache {
		return "caches"
	}
	return string(k) + "s"
}

// StoreKey is the key of r inside a store, relative to the store's
// prefix: "<plural>/<path>". Names never contain '/', so a key's prefix up
// to a '/' names exactly one parent's children.
func StoreKey(r Ref) string { return plural(r.Kind) + "/" + r.Path }

// parentOf returns the resource r lives in; tenants have none.
func parentOf(r Ref) (Ref, bool) {
	switch r.Kind {
	case KindNamespace:
		t, _, _ := strings.Cut(r.Path, "/")
		return Ref{Kind: KindTenant, Path: t}, true
	case KindStream, KindCache:
		i := strings.LastIndexByte(r.Path, '/')
		return Ref{Kind: KindNamespace, Path: r.Path[:i]}, true
	}
	return Ref{}, false
}

// childPrefixes returns the store key prefixes under which r's children
// live; a resource with any key under them cannot be deleted.
func childPrefixes(r Ref) []string {
	switch r.Kind {
	case KindTenant:
		return []string{plural(KindNamespace) + "/" + r.Path + "/"}
	case KindNamespace:
		return []string{plural(KindStream) + "/" + r.Path + "/", plural(KindCache) + "/" + r.Path + "/"}
	}
	return nil
}

// ListPrefix is the store key prefix of every resource of kind inside
// parent ("" for tenants, "t" for namespaces, "t/ns" for streams and caches).
func ListPrefix(kind Kind, parent string) string {
	if parent == "" {
		return plural(kind) + "/"
	}
	return plural(kind) + "/" + parent + "/"
}

// ParseStoreKey is the inverse of StoreKey.
func ParseStoreKey(key string) (Ref, bool) {
	prefix, path, ok := strings.Cut(key, "/")
	if !ok {
		return Ref{}, false
	}
	for _, k := range Kinds {
		if plural(k) == prefix && strings.Count(path, "/") == depth(k)-1 {
			return Ref{Kind: k, Path: path}, true
		}
	}
	return Ref{}, false
}
