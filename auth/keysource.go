package auth

import (
	"context"
	"crypto/ed25519"
	"sync"
)

// tenantKey extracts an Ed25519 key fit for EdDSA from a JWKS key: a Felix
// tenant key set may hold nothing else, so an RSA or HMAC key under a Felix
// kid is refused rather than tried.
func tenantKey(k Key, tenant string) (ed25519.PublicKey, error) {
	pub, ok := k.Public.(ed25519.PublicKey)
	if !ok || !algorithmFits(k, EdDSA) {
		return nil, reject(ErrAlgorithm, "tenant %q key %q is %s (alg %q), Felix tokens need OKP Ed25519/EdDSA",
			tenant, k.ID, keyType(k.Public), k.Algorithm)
	}
	return pub, nil
}

// MemoryKeySource is a KeySource held in memory: tests, and a broker fed
// tenant key sets by some other channel (e.g. the metadata watch). Safe for
// concurrent use.
type MemoryKeySource struct {
	mu struct {
		sync.RWMutex
		tenants map[string]map[string]ed25519.PublicKey
	}
}

// NewMemoryKeySource returns an empty source.
func NewMemoryKeySource() *MemoryKeySource {
	s := &MemoryKeySource{}
	s.mu.tenants = make(map[string]map[string]ed25519.PublicKey)
	return s
}

// SetJWKS replaces tenant's keys with those of a JWKS document, such as
// Minter.JWKS returns. Every usable key must be Ed25519.
func (s *MemoryKeySource) SetJWKS(tenant string, jwks []byte) error {
	keys, _, err := ParseJWKS(jwks)
	if err != nil {
		return reject(ErrJWKSUnavailable, "tenant %q: %v", tenant, err)
	}
	m := make(map[string]ed25519.PublicKey, len(keys))
	for kid, k := range keys {
		pub, err := tenantKey(k, tenant)
		if err != nil {
			return err
		}
		m[kid] = pub
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.tenants[tenant] = m
	return nil
}

// RemoveTenant forgets tenant's keys.
func (s *MemoryKeySource) RemoveTenant(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.tenants, tenant)
}

// PublicKey implements KeySource.
func (s *MemoryKeySource) PublicKey(_ context.Context, tenant, kid string) (ed25519.PublicKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys, ok := s.mu.tenants[tenant]
	if !ok {
		return nil, reject(ErrTenant, "no keys for tenant %q", tenant)
	}
	pub, ok := keys[kid]
	if !ok {
		return nil, reject(ErrUnknownKey, "kid %q is not a key of tenant %q", kid, tenant)
	}
	return pub, nil
}

// JWKSKeySource is a KeySource that fetches each tenant's JWKS through a
// Fetcher, so caching, refresh on an unknown kid (a rotation) and its rate
// limit apply. The broker uses it with URL pointing at the control plane's
// /v1/tenants/{t}/.well-known/jwks.json.
type JWKSKeySource struct {
	Fetcher *Fetcher
	// URL returns the JWKS URL of tenant, or "" if the tenant is unknown.
	// The tenant comes from the client, so URL must return "" for
	// tenants the broker does not know (from the metadata watch): each
	// distinct URL is a cache entry and a fetch.
	URL func(tenant string) string
}

// PublicKey implements KeySource.
func (s JWKSKeySource) PublicKey(ctx context.Context, tenant, kid string) (ed25519.PublicKey, error) {
	url := s.URL(tenant)
	if url == "" {
		return nil, reject(ErrTenant, "no JWKS URL for tenant %q", tenant)
	}
	k, err := s.Fetcher.Key(ctx, url, kid)
	if err != nil {
		return nil, err
	}
	return tenantKey(k, tenant)
}
