package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// IssuerConfig is one identity provider a tenant trusts.
type IssuerConfig struct {
	// Issuer must equal the token's iss exactly, e.g.
	// "https://login.microsoftonline.com/{tenant-id}/v2.0".
	Issuer string
	// JWKSURL is where the IdP publishes its keys (https, or http only for
	// loopback tests).
	JWKSURL string
	// Audiences: the token's aud must contain at least one. Required: a
	// token minted for another application of the same IdP must not work.
	Audiences []string
	// Algorithms the IdP signs with, from RS256, PS256, ES256, EdDSA.
	// Empty means RS256 (Entra ID, Okta, Auth0 and Google all use it).
	Algorithms []string
	// ClockSkew tolerated on exp, nbf and iat. Default 60s, at most 5m.
	ClockSkew time.Duration
	// RolesClaim names the claim holding the roles or groups that Policy
	// bindings map to Felix roles: a string or an array of strings.
	// Default "roles" (Entra app roles); "groups" is common too.
	RolesClaim string
}

func (c IssuerConfig) withDefaults() IssuerConfig {
	if len(c.Algorithms) == 0 {
		c.Algorithms = []string{RS256}
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = 60 * time.Second
	}
	if c.RolesClaim == "" {
		c.RolesClaim = "roles"
	}
	return c
}

func (c IssuerConfig) validate() error {
	if c.Issuer == "" {
		return reject(ErrConfig, "issuer: empty Issuer")
	}
	u, err := url.Parse(c.JWKSURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return reject(ErrConfig, "issuer %q: JWKSURL %q is not an http(s) URL", c.Issuer, c.JWKSURL)
	}
	if len(c.Audiences) == 0 || slices.Contains(c.Audiences, "") {
		return reject(ErrConfig, "issuer %q: Audiences must be non-empty strings", c.Issuer)
	}
	for _, a := range c.Algorithms {
		if _, ok := supportedAlgs[a]; !ok {
			return reject(ErrConfig, "issuer %q: algorithm %q not allowed (only RS256, PS256, ES256, EdDSA; never none or HS*)", c.Issuer, a)
		}
	}
	if c.ClockSkew < 0 || c.ClockSkew > maxClockSkew {
		return reject(ErrConfig, "issuer %q: ClockSkew %s outside [0, %s]", c.Issuer, c.ClockSkew, maxClockSkew)
	}
	return nil
}

// TenantConfig is what one tenant trusts and grants.
type TenantConfig struct {
	Tenant  string
	Issuers []IssuerConfig
	// Policy maps the IdP's roles or groups to Felix permissions.
	Policy Policy
}

// IdPConfig configures an IdPVerifier.
type IdPConfig struct {
	Tenants []TenantConfig
	// Fetcher fetches the IdPs' key sets. Required: it is shared with
	// whatever else fetches JWKS so that rate limits hold per URL.
	Fetcher *Fetcher
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Identity is a verified IdP token.
type Identity struct {
	Tenant string
	Issuer string
	// Subject is the IdP's sub claim.
	Subject string
	// Principal identifies the subject across issuers:
	// hex(sha256(iss + "|" + sub)), as the published Felix does, so two
	// IdPs cannot collide on a sub value.
	Principal string
	Audience  []string
	Expiry    time.Time
	// Roles are the values of the issuer's RolesClaim.
	Roles []string
}

type trustedIssuer struct {
	cfg  IssuerConfig
	algs []jose.SignatureAlgorithm
}

type tenantTrust struct {
	issuers map[string]*trustedIssuer
	policy  Policy
}

// IdPVerifier verifies identity-provider tokens for the token exchange. Safe
// for concurrent use; tenants can be set and removed while it serves (the
// control plane's idp-issuers API).
type IdPVerifier struct {
	fetcher *Fetcher
	now     func() time.Time
	// tenants is copy-on-write: Verify loads it without a lock, writers
	// serialise on mu and publish a new map.
	tenants atomic.Pointer[map[string]*tenantTrust]
	mu      sync.Mutex
}

// NewIdPVerifier validates cfg and returns a verifier.
func NewIdPVerifier(cfg IdPConfig) (*IdPVerifier, error) {
	if cfg.Fetcher == nil {
		return nil, reject(ErrConfig, "IdPConfig.Fetcher is nil")
	}
	v := &IdPVerifier{fetcher: cfg.Fetcher, now: cfg.Now}
	if v.now == nil {
		v.now = time.Now
	}
	v.tenants.Store(&map[string]*tenantTrust{})
	seen := make(map[string]bool)
	for _, t := range cfg.Tenants {
		if seen[t.Tenant] {
			return nil, reject(ErrConfig, "tenant %q configured twice", t.Tenant)
		}
		seen[t.Tenant] = true
		if err := v.SetTenant(t); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// SetTenant validates t and replaces that tenant's issuers and policy.
func (v *IdPVerifier) SetTenant(t TenantConfig) error {
	if t.Tenant == "" {
		return reject(ErrConfig, "tenant with empty name")
	}
	if err := t.Policy.Validate(t.Tenant); err != nil {
		return err
	}
	tt := &tenantTrust{issuers: make(map[string]*trustedIssuer), policy: t.Policy}
	for _, ic := range t.Issuers {
		if err := ic.validate(); err != nil {
			return fmt.Errorf("tenant %q: %w", t.Tenant, err)
		}
		ic = ic.withDefaults()
		tt.issuers[ic.Issuer] = &trustedIssuer{cfg: ic, algs: algList(ic.Algorithms)}
	}
	v.update(func(m map[string]*tenantTrust) { m[t.Tenant] = tt })
	return nil
}

// RemoveTenant stops trusting any IdP for tenant.
func (v *IdPVerifier) RemoveTenant(tenant string) {
	v.update(func(m map[string]*tenantTrust) { delete(m, tenant) })
}

func (v *IdPVerifier) update(edit func(map[string]*tenantTrust)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := maps.Clone(*v.tenants.Load())
	edit(m)
	v.tenants.Store(&m)
}

func (v *IdPVerifier) tenant(name string) *tenantTrust { return (*v.tenants.Load())[name] }

// idpClaims are the registered claims of an IdP token. Roles are read from
// the whole claim set afterwards, because their claim name is per issuer.
type idpClaims struct {
	timeClaims
	Issuer   string   `json:"iss"`
	Subject  string   `json:"sub"`
	Audience audience `json:"aud"`
}

// Verify checks an IdP token presented for tenant: known tenant, issuer
// trusted by that tenant, kid known to the issuer's JWKS, allowed algorithm
// fitting the key, signature, aud, exp, nbf, iat. The order makes the cheap,
// offline checks first so that garbage never causes a JWKS fetch.
func (v *IdPVerifier) Verify(ctx context.Context, tenant, raw string) (*Identity, error) {
	tt := v.tenant(tenant)
	if tt == nil {
		return nil, reject(ErrTenant, "tenant %q has no identity provider configured", tenant)
	}
	h, err := parseHeader(raw)
	if err != nil {
		return nil, err
	}
	// The issuer picks the JWKS, so it is read before verification; it is
	// trusted only after the signature with that issuer's key checks out.
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return nil, err
	}
	ti := tt.issuers[iss]
	if ti == nil {
		return nil, reject(ErrIssuer, "issuer %q is not trusted by tenant %q", iss, tenant)
	}
	if !slices.Contains(ti.cfg.Algorithms, h.Alg) {
		return nil, reject(ErrAlgorithm, "alg %q not allowed for issuer %q (allowed %v)", h.Alg, iss, ti.cfg.Algorithms)
	}
	if h.Kid == "" {
		return nil, reject(ErrUnknownKey, "token header has no kid")
	}
	key, err := v.fetcher.Key(ctx, ti.cfg.JWKSURL, h.Kid)
	if err != nil {
		return nil, err
	}
	var c idpClaims
	var extra map[string]json.RawMessage
	if err := verifySignature(raw, h, ti.algs, key, &c, &extra); err != nil {
		return nil, err
	}
	return v.identity(tenant, ti, c, extra)
}

// identity checks the verified claims and builds the Identity.
func (v *IdPVerifier) identity(tenant string, ti *trustedIssuer, c idpClaims, extra map[string]json.RawMessage) (*Identity, error) {
	if c.Issuer != ti.cfg.Issuer {
		return nil, reject(ErrIssuer, "iss %q differs from the issuer the key was chosen for", c.Issuer)
	}
	if !c.Audience.containsAny(ti.cfg.Audiences) {
		return nil, reject(ErrAudience, "aud %q contains none of %q", []string(c.Audience), ti.cfg.Audiences)
	}
	if err := c.check(v.now(), ti.cfg.ClockSkew); err != nil {
		return nil, err
	}
	if c.Subject == "" {
		return nil, reject(ErrClaims, "token has no sub")
	}
	roles, err := stringsClaim(extra[ti.cfg.RolesClaim])
	if err != nil {
		return nil, reject(ErrClaims, "claim %q: %v", ti.cfg.RolesClaim, err)
	}
	sum := sha256.Sum256([]byte(c.Issuer + "|" + c.Subject))
	return &Identity{
		Tenant:    tenant,
		Issuer:    c.Issuer,
		Subject:   c.Subject,
		Principal: hex.EncodeToString(sum[:]),
		Audience:  c.Audience,
		Expiry:    c.Expiry.Time().UTC(),
		Roles:     roles,
	}, nil
}
