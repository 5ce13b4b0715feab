package controlplane

import (
	"strings"
)

// Kind is a resource type.
type Kind string

// The resource kinds, from the top of the hierarchy down: a tenant holds
// namespaces, a namespace holds streams and caches.
const (
	KindTenant    Kind = "tenant"
	KindNamespace Kind = "namespace"
	KindStream    Kind = "stream"
	KindCache     Kind = "cache"
)

// Kinds lists every kind in hierarchy order.
var Kinds = []Kind{KindTenant, KindNamespace, KindStream, KindCache}

// depth is the number of path segments of a kind's resources.
func (k Kind) depth() int {
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
func (k Kind) plural() string {
	if k == KindCache {
		return "caches"
	}
	return string(k) + "s"
}

// Ref names one resource: its kind and its path, "tenant",
// "tenant/namespace" or "tenant/namespace/name".
type Ref struct {
	Kind Kind   `json:"kind"`
	Path string `json:"key"`
}

func (r Ref) String() string { return string(r.Kind) + " " + r.Path }

// StoreKey is the key of the resource inside a store, relative to the
// store's prefix: "<plural>/<path>". Names never contain '/', so a key's
// prefix up to a '/' names exactly one parent's children.
func (r Ref) StoreKey() string { return r.Kind.plural() + "/" + r.Path }

// Parent returns the resource r lives in; tenants have none.
func (r Ref) Parent() (Ref, bool) {
	switch r.Kind {
	case KindNamespace:
		t, _, _ := strings.Cut(r.Path, "/")
		return Ref{KindTenant, t}, true
	case KindStream, KindCache:
		i := strings.LastIndexByte(r.Path, '/')
		return Ref{KindNamespace, r.Path[:i]}, true
	}
	return Ref{}, false
}

// ChildPrefixes returns the store key prefixes under which r's children
// live; a resource with any key under them cannot be deleted.
func (r Ref) ChildPrefixes() []string {
	switch r.Kind {
	case KindTenant:
		return []string{KindNamespace.plural() + "/" + r.Path + "/"}
	case KindNamespace:
		return []string{KindStream.plural() + "/" + r.Path + "/", KindCache.plural() + "/" + r.Path + "/"}
	}
	return nil
}

// ListPrefix is the store key prefix of every resource of kind inside
// parent ("" for tenants, "t" for namespaces, "t/ns" for streams and caches).
func ListPrefix(kind Kind, parent string) string {
	if parent == "" {
		return kind.plural() + "/"
	}
	return kind.plural() + "/" + parent + "/"
}

// ParseStoreKey is the inverse of Ref.StoreKey.
func ParseStoreKey(key string) (Ref, bool) {
	plural, path, ok := strings.Cut(key, "/")
	if !ok {
		return Ref{}, false
	}
	for _, k := range Kinds {
		if k.plural() == plural && strings.Count(path, "/") == k.depth()-1 {
			return Ref{k, path}, true
		}
	}
	return Ref{}, false
}
