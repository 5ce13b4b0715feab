package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// SigningKey is one Ed25519 key of a tenant.
type SigningKey struct {
	// ID is the kid: 16 random bytes in hex, as the published Felix.
	ID      string
	Private ed25519.PrivateKey
	Created time.Time
	// Retired is when a newer key replaced this one; zero for the current
	// key.
	Retired time.Time
}

// Public returns the verification key.
func (k SigningKey) Public() ed25519.PublicKey { return k.Private.Public().(ed25519.PublicKey) }

// KeySet is one tenant's signing keys: the current key, which signs new
// tokens, and the previous keys, which still verify the tokens they signed.
// A previous key is kept until every token it can have signed has expired
// (retired + token TTL + the second Mint rounds the expiry up by + clock
// skew), so rotation never cuts off a live token; Rotate prunes the ones past
// that. KeySet is a value guarded by its owner (Minter).
type KeySet struct {
	Current  SigningKey
	Previous []SigningKey
}

// newSigningKey draws a key and its kid from r.
func newSigningKey(r io.Reader, now time.Time) (SigningKey, error) {
	var id [16]byte
	if _, err := io.ReadFull(r, id[:]); err != nil {
		return SigningKey{}, err
	}
	_, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return SigningKey{}, err
	}
	return SigningKey{ID: hex.EncodeToString(id[:]), Private: priv, Created: now}, nil
}

// rotated returns the set after a rotation at now with key next: the current
// key moves to Previous, and previous keys retired before horizon are dropped.
func (s KeySet) rotated(next SigningKey, now, horizon time.Time) KeySet {
	out := KeySet{Current: next}
	old := s.Current
	old.Retired = now
	out.Previous = append(out.Previous, old)
	for _, p := range s.Previous {
		if p.Retired.After(horizon) {
			out.Previous = append(out.Previous, p)
		}
	}
	return out
}

// key returns the key with kid, current or previous.
func (s KeySet) key(kid string) (SigningKey, bool) {
	if s.Current.ID == kid {
		return s.Current, true
	}
	for _, p := range s.Previous {
		if p.ID == kid {
			return p, true
		}
	}
	return SigningKey{}, false
}

// JWKS returns the public keys as a JSON Web Key Set, current key first, in
// the form the published control plane serves at
// /v1/tenants/{t}/.well-known/jwks.json (kty OKP, crv Ed25519, alg EdDSA,
// use sig, kid, x).
func (s KeySet) JWKS() ([]byte, error) {
	set := jose.JSONWebKeySet{}
	for _, k := range append([]SigningKey{s.Current}, s.Previous...) {
		set.Keys = append(set.Keys, jose.JSONWebKey{
			Key: k.Public(), KeyID: k.ID, Algorithm: EdDSA, Use: "sig",
		})
	}
	return json.Marshal(set)
}

// MinterConfig configures a Minter.
type MinterConfig struct {
	// Issuer is the iss of minted tokens. Default "felix-auth".
	Issuer string
	// Audience is the aud of minted tokens. Default "felix-broker".
	Audience string
	// TTL is a token's lifetime (FELIX_TOKEN_TTL_S). Default 15m, at most
	// 24h: a Felix token cannot be revoked, only outlived.
	TTL time.Duration
	// ClockSkew is added when deciding a retired key can no longer have
	// live tokens; use the verifiers' skew. Default 60s.
	ClockSkew time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Rand is the entropy for keys and token IDs. Nil means crypto/rand.
	Rand io.Reader
}

// Default issuer and audience of Felix tokens, as the published Felix.
const (
	DefaultFelixIssuer   = "felix-auth"
	DefaultFelixAudience = "felix-broker"
)

const maxTokenTTL = 24 * time.Hour

func (c MinterConfig) withDefaults() MinterConfig {
	if c.Issuer == "" {
		c.Issuer = DefaultFelixIssuer
	}
	if c.Audience == "" {
		c.Audience = DefaultFelixAudience
	}
	if c.TTL == 0 {
		c.TTL = 15 * time.Minute
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = 60 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	return c
}

func (c MinterConfig) validate() error {
	if c.TTL < 0 || c.TTL > maxTokenTTL {
		return reject(ErrConfig, "MinterConfig.TTL %s outside (0, %s]", c.TTL, maxTokenTTL)
	}
	if c.ClockSkew < 0 || c.ClockSkew > maxClockSkew {
		return reject(ErrConfig, "MinterConfig.ClockSkew %s outside [0, %s]", c.ClockSkew, maxClockSkew)
	}
	return nil
}

// KeySource gives a verifier the public key with kid for tenant. The broker
// backs it with a cached fetch of the control plane's tenant JWKS
// (JWKSKeySource); the control plane with its own Minter. Implementations
// must be safe for concurrent use, return errors wrapping ErrUnknownKey,
// ErrTenant or ErrJWKSUnavailable, and not touch the network on a cache hit:
// this is on the data path.
type KeySource interface {
	PublicKey(ctx context.Context, tenant, kid string) (ed25519.PublicKey, error)
}
