package auth

import (
	"context"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Claims are a verified Felix token's claims.
type Claims struct {
	Issuer   string
	Audience []string
	// Tenant is the tid claim: the only tenant the token acts on.
	Tenant  string
	Subject string
	// Perms are the grants Check consults.
	Perms    []Permission
	IssuedAt time.Time
	// Expiry is exp. The broker closes a token's streams at Expiry: a
	// verified token is only valid until then, not for the life of the
	// connection (the published Felix never re-checked).
	Expiry time.Time
	ID     string
}

// Valid reports whether the claims are still within their lifetime at now,
// allowing skew; the broker calls it before long-running operations.
func (c *Claims) Valid(now time.Time, skew time.Duration) error {
	if now.Add(-skew).After(c.Expiry) {
		return reject(ErrExpired, "exp %s passed %s ago", c.Expiry.UTC().Format(time.RFC3339), now.Sub(c.Expiry).Round(time.Second))
	}
	return nil
}

func (c felixClaims) public() *Claims {
	out := &Claims{
		Issuer: c.Issuer, Audience: c.Audience, Tenant: c.Tenant, Subject: c.Subject,
		Perms: c.Perms, ID: c.ID,
	}
	if c.IssuedAt != nil {
		out.IssuedAt = c.IssuedAt.Time().UTC()
	}
	if c.Expiry != nil {
		out.Expiry = c.Expiry.Time().UTC()
	}
	return out
}

// VerifierConfig configures a Verifier of Felix tokens.
type VerifierConfig struct {
	// Keys supplies tenants' public keys. Required.
	Keys KeySource
	// Issuer and Audience expected in tokens. Defaults "felix-auth" and
	// "felix-broker".
	Issuer, Audience string
	// ClockSkew tolerated on exp and iat. Default 60s, at most 5m.
	ClockSkew time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Verifier checks Felix tokens locally, against keys from its KeySource: no
// call to the control plane on a warm cache. Safe for concurrent use.
type Verifier struct {
	cfg VerifierConfig
}

var eddsaOnly = []jose.SignatureAlgorithm{jose.EdDSA}

// NewVerifier returns a Verifier.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.Keys == nil {
		return nil, reject(ErrConfig, "VerifierConfig.Keys is nil")
	}
	if cfg.ClockSkew < 0 || cfg.ClockSkew > maxClockSkew {
		return nil, reject(ErrConfig, "VerifierConfig.ClockSkew %s outside [0, %s]", cfg.ClockSkew, maxClockSkew)
	}
	if cfg.Issuer == "" {
		cfg.Issuer = DefaultFelixIssuer
	}
	if cfg.Audience == "" {
		cfg.Audience = DefaultFelixAudience
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = 60 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Verifier{cfg: cfg}, nil
}

// Verify checks a Felix token presented for tenant: EdDSA only, kid known to
// tenant's keys, signature, iss, aud, tid equal to tenant, exp, iat, and a
// well-formed, same-tenant permission list. The tenant is the one the client
// claimed on the connection; a token of tenant A presented for tenant B fails
// with ErrTenant before any key of B is looked up.
func (v *Verifier) Verify(ctx context.Context, tenant, raw string) (*Claims, error) {
	h, err := parseHeader(raw)
	if err != nil {
		return nil, err
	}
	if h.Alg != EdDSA {
		return nil, reject(ErrAlgorithm, "alg %q: Felix tokens are EdDSA only", h.Alg)
	}
	if h.Kid == "" {
		return nil, reject(ErrUnknownKey, "token header has no kid")
	}
	// Read tid first so that a cross-tenant token gets the precise reason
	// (and no key fetch for the wrong tenant); the verified tid is checked
	// again below.
	u, err := readUnverified(raw)
	if err != nil {
		return nil, err
	}
	if u.Tenant == nil || *u.Tenant != tenant {
		got := "<none>"
		if u.Tenant != nil {
			got = *u.Tenant
		}
		return nil, reject(ErrTenant, "token is for tenant %q, presented for %q", got, tenant)
	}
	pub, err := v.cfg.Keys.PublicKey(ctx, tenant, h.Kid)
	if err != nil {
		return nil, err
	}
	var c felixClaims
	key := Key{ID: h.Kid, Algorithm: EdDSA, Public: pub}
	if err := verifySignature(raw, h, eddsaOnly, key, &c); err != nil {
		return nil, err
	}
	if err := v.checkClaims(tenant, &c); err != nil {
		return nil, err
	}
	return c.public(), nil
}

func (v *Verifier) checkClaims(tenant string, c *felixClaims) error {
	if c.Issuer != v.cfg.Issuer {
		return reject(ErrIssuer, "iss %q, want %q", c.Issuer, v.cfg.Issuer)
	}
	if !c.Audience.containsAny([]string{v.cfg.Audience}) {
		return reject(ErrAudience, "aud %q does not contain %q", []string(c.Audience), v.cfg.Audience)
	}
	if c.Tenant != tenant {
		// Reached only if tenant's key set holds the signing key: a
		// shared or misconfigured key must still not cross tenants.
		return reject(ErrTenant, "token is for tenant %q, presented for %q", c.Tenant, tenant)
	}
	if c.IssuedAt == nil {
		return reject(ErrIssuedAt, "token has no iat")
	}
	tc := timeClaims{Expiry: c.Expiry, IssuedAt: c.IssuedAt}
	if err := tc.check(v.cfg.Now(), v.cfg.ClockSkew); err != nil {
		return err
	}
	if c.Subject == "" {
		return reject(ErrClaims, "token has no sub")
	}
	for _, p := range c.Perms {
		if err := p.Validate(tenant); err != nil {
			return reject(ErrClaims, "perms: %v", err)
		}
	}
	return nil
}
