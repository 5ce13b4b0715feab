package auth

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"io"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Minter holds every tenant's signing keys and mints Felix tokens. It lives
// in the control plane; it also serves as the KeySource of an in-process
// verifier. Safe for concurrent use.
type Minter struct {
	cfg MinterConfig

	mu struct {
		sync.RWMutex
		tenants map[string]*minterTenant
	}
}

// minterTenant caches the signer so minting does not rebuild it per token.
type minterTenant struct {
	keys   KeySet
	signer jose.Signer
}

// NewMinter returns a Minter with no tenants.
func NewMinter(cfg MinterConfig) (*Minter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Minter{cfg: cfg.withDefaults()}
	m.mu.tenants = make(map[string]*minterTenant)
	return m, nil
}

// AddTenant creates tenant's first key. It is an error if the tenant exists.
func (m *Minter) AddTenant(tenant string) error {
	k, err := newSigningKey(m.cfg.Rand, m.cfg.Now())
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if tenant == "" {
		return reject(ErrConfig, "empty tenant name")
	}
	if _, ok := m.mu.tenants[tenant]; ok {
		return reject(ErrConfig, "tenant %q already has keys", tenant)
	}
	return m.setLocked(tenant, KeySet{Current: k})
}

// SetKeys installs a tenant's key set, e.g. loaded from the control plane's
// store at start-up; Keys reads it back for storing.
func (m *Minter) SetKeys(tenant string, ks KeySet) error {
	if len(ks.Current.Private) != ed25519.PrivateKeySize || ks.Current.ID == "" {
		return reject(ErrConfig, "tenant %q: current key is missing or not Ed25519", tenant)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.setLocked(tenant, ks)
}

// Keys returns a copy of tenant's key set.
func (m *Minter) Keys(tenant string) (KeySet, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.mu.tenants[tenant]
	if t == nil {
		return KeySet{}, reject(ErrTenant, "tenant %q has no signing keys", tenant)
	}
	ks := t.keys
	ks.Previous = append([]SigningKey(nil), ks.Previous...)
	return ks, nil
}

// RemoveTenant forgets tenant's keys; its tokens stop verifying at once.
func (m *Minter) RemoveTenant(tenant string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mu.tenants, tenant)
}

func (m *Minter) setLocked(tenant string, ks KeySet) error {
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.EdDSA, Key: ks.Current.Private},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), ks.Current.ID))
	if err != nil {
		return reject(ErrConfig, "tenant %q: %v", tenant, err)
	}
	m.mu.tenants[tenant] = &minterTenant{keys: ks, signer: signer}
	return nil
}

// Rotate makes a new current key for tenant and returns its kid. The old
// key keeps verifying until the tokens it signed have expired.
func (m *Minter) Rotate(tenant string) (string, error) {
	now := m.cfg.Now()
	k, err := newSigningKey(m.cfg.Rand, now)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.mu.tenants[tenant]
	if t == nil {
		return "", reject(ErrTenant, "tenant %q has no signing keys", tenant)
	}
	// A token signed just before now expires at most TTL plus the second
	// Mint rounds up to after it.
	horizon := now.Add(-m.cfg.TTL - time.Second - m.cfg.ClockSkew)
	return k.ID, m.setLocked(tenant, t.keys.rotated(k, now, horizon))
}

// JWKS returns tenant's public keys as a JSON Web Key Set.
func (m *Minter) JWKS(tenant string) ([]byte, error) {
	ks, err := m.Keys(tenant)
	if err != nil {
		return nil, err
	}
	return ks.JWKS()
}

// PublicKey implements KeySource.
func (m *Minter) PublicKey(_ context.Context, tenant, kid string) (ed25519.PublicKey, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.mu.tenants[tenant]
	if t == nil {
		return nil, reject(ErrTenant, "tenant %q has no signing keys", tenant)
	}
	k, ok := t.keys.key(kid)
	if !ok {
		return nil, reject(ErrUnknownKey, "kid %q is not a key of tenant %q", kid, tenant)
	}
	return k.Public(), nil
}

// felixClaims is the wire form of a Felix token's claims.
type felixClaims struct {
	Issuer   string           `json:"iss"`
	Audience audience         `json:"aud"`
	Subject  string           `json:"sub"`
	Tenant   string           `json:"tid"`
	IssuedAt *jwt.NumericDate `json:"iat"`
	Expiry   *jwt.NumericDate `json:"exp"`
	ID       string           `json:"jti,omitempty"`
	Perms    []Permission     `json:"perms"`
}

// Mint signs a Felix token for subject in tenant granting perms, valid for
// the configured TTL from now. Every permission must be valid for tenant: a
// token never carries a grant on another tenant.
func (m *Minter) Mint(tenant, subject string, perms []Permission) (string, *Claims, error) {
	m.mu.RLock()
	t := m.mu.tenants[tenant]
	m.mu.RUnlock()
	if t == nil {
		return "", nil, reject(ErrTenant, "tenant %q has no signing keys", tenant)
	}
	if subject == "" {
		return "", nil, reject(ErrClaims, "empty subject")
	}
	if len(perms) == 0 {
		return "", nil, reject(ErrForbidden, "no permissions to grant %q in tenant %q", subject, tenant)
	}
	for _, p := range perms {
		if err := p.Validate(tenant); err != nil {
			return "", nil, err
		}
	}
	var jti [12]byte
	if _, err := io.ReadFull(m.cfg.Rand, jti[:]); err != nil {
		return "", nil, err
	}
	// Whole seconds: NumericDate has no finer precision, and the Claims
	// returned must equal what a verifier will read. The expiry rounds up so
	// that a token lives at least the TTL: truncating both ends made a
	// 1.5 s token minted at .99 expire 10 ms later.
	now := m.cfg.Now()
	c := felixClaims{
		Issuer: m.cfg.Issuer, Audience: audience{m.cfg.Audience}, Subject: subject, Tenant: tenant,
		IssuedAt: jwt.NewNumericDate(now.Truncate(time.Second)),
		Expiry:   jwt.NewNumericDate(ceilSecond(now.Add(m.cfg.TTL))),
		ID:       hex.EncodeToString(jti[:]), Perms: perms,
	}
	raw, err := jwt.Signed(t.signer).Claims(c).Serialize()
	if err != nil {
		return "", nil, err
	}
	return raw, c.public(), nil
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
