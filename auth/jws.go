package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The asymmetric algorithms the package verifies. none and HS* are absent on
// purpose: a symmetric algorithm verified with a public key is the classic
// confusion attack (the attacker signs with the public key as the HMAC
// secret), and none means no signature at all.
const (
	RS256 = "RS256"
	PS256 = "PS256"
	ES256 = "ES256"
	EdDSA = "EdDSA"
)

var supportedAlgs = map[string]jose.SignatureAlgorithm{
	RS256: jose.RS256,
	PS256: jose.PS256,
	ES256: jose.ES256,
	EdDSA: jose.EdDSA,
}

// MaxTokenBytes bounds a token before any decoding. Entra and Okta tokens with
// group claims stay under 8 KiB; anything much larger is an attempt to make us
// allocate.
const MaxTokenBytes = 16 << 10

// minRSABits rejects RSA keys too short to trust (NIST SP 800-131A).
const minRSABits = 2048

// Key is a public verification key from a JWKS or a Felix key set.
type Key struct {
	// ID is the JWK kid.
	ID string
	// Algorithm is the JWK alg, or "" when the JWKS did not declare one
	// (Microsoft Entra ID does not): the key type then decides which
	// algorithms it may verify (algorithmFits).
	Algorithm string
	// Public is *rsa.PublicKey, *ecdsa.PublicKey (P-256) or
	// ed25519.PublicKey.
	Public crypto.PublicKey
}

// algorithmFits binds an algorithm to a key type, so a key declared without
// alg cannot be used with an algorithm meant for another type, and a key
// declared with alg only with that one.
func algorithmFits(k Key, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch pub := k.Public.(type) {
	case *rsa.PublicKey:
		return (alg == RS256 || alg == PS256) && pub.N.BitLen() >= minRSABits
	case *ecdsa.PublicKey:
		return alg == ES256 && pub.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == EdDSA && len(pub) == ed25519.PublicKeySize
	}
	return false
}

// keyType names a key's type for error messages.
func keyType(pub crypto.PublicKey) string {
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", pub.N.BitLen())
	case *ecdsa.PublicKey:
		return "EC " + pub.Curve.Params().Name
	case ed25519.PublicKey:
		return "OKP Ed25519"
	}
	return fmt.Sprintf("%T", pub)
}

// header is the part of the JOSE header we decide on before touching the
// signature. Parsing it ourselves, rather than reading go-jose's parse error,
// is what lets us say "alg none" or "HS256" instead of "parse failed".
type header struct {
	Alg  string   `json:"alg"`
	Kid  string   `json:"kid"`
	Typ  string   `json:"typ"`
	Crit []string `json:"crit"`
}

// parseHeader checks the compact shape and decodes the protected header.
func parseHeader(raw string) (header, error) {
	var h header
	if len(raw) > MaxTokenBytes {
		return h, reject(ErrMalformed, "token is %d bytes, limit %d", len(raw), MaxTokenBytes)
	}
	if raw == "" {
		return h, reject(ErrMalformed, "empty token")
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return h, reject(ErrMalformed, "compact JWS has 3 dot-separated parts, got %d", len(parts))
	}
	if parts[0] == "" || parts[1] == "" {
		return h, reject(ErrMalformed, "empty header or payload")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return h, reject(ErrMalformed, "header is not base64url: %v", err)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, reject(ErrMalformed, "header is not a JSON object: %v", err)
	}
	if len(h.Crit) > 0 {
		return h, reject(ErrMalformed, "unsupported critical header parameters %q", h.Crit)
	}
	switch {
	case h.Alg == "":
		return h, reject(ErrMalformed, "header has no alg")
	case strings.EqualFold(h.Alg, "none"):
		return h, reject(ErrAlgorithm, "alg %q: unsigned tokens are never accepted", h.Alg)
	case strings.HasPrefix(h.Alg, "HS"):
		return h, reject(ErrAlgorithm, "alg %q: symmetric algorithms are never accepted", h.Alg)
	}
	// Checked after alg so that an unsigned "alg":"none" token is named
	// for what it is.
	if parts[2] == "" {
		return h, reject(ErrSignature, "empty signature")
	}
	return h, nil
}

// algList turns validated algorithm names into go-jose's list, which
// ParseSigned enforces again: two independent checks of the same list.
func algList(names []string) []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, 0, len(names))
	for _, n := range names {
		out = append(out, supportedAlgs[n])
	}
	return out
}

// verifySignature checks that h.Alg is allowed and fits key, verifies the
// signature and decodes the verified payload into dest.
func verifySignature(raw string, h header, allowed []jose.SignatureAlgorithm, key Key, dest ...any) error {
	ok := false
	for _, a := range allowed {
		if string(a) == h.Alg {
			ok = true
			break
		}
	}
	if !ok {
		return reject(ErrAlgorithm, "alg %q is not in the allowed list %v", h.Alg, allowed)
	}
	if !algorithmFits(key, h.Alg) {
		declared := key.Algorithm
		if declared == "" {
			declared = "none declared"
		}
		return reject(ErrAlgorithm, "alg %q does not fit key %q (%s, alg %s)", h.Alg, key.ID, keyType(key.Public), declared)
	}
	tok, err := jwt.ParseSigned(raw, allowed)
	if err != nil {
		return reject(ErrMalformed, "%v", err)
	}
	// Duplicate header members may decode differently in encoding/json and
	// go-jose's parser; refuse a token whose two readings disagree.
	if len(tok.Headers) != 1 || tok.Headers[0].Algorithm != h.Alg || tok.Headers[0].KeyID != h.Kid {
		return reject(ErrMalformed, "ambiguous JOSE header")
	}
	// Claims with no destination only verifies; the payload is decoded
	// separately so a bad signature and bad JSON get different reasons.
	if err := tok.Claims(key.Public); err != nil {
		return reject(ErrSignature, "key %q: %v", key.ID, err)
	}
	// The token object holds the payload it just verified; reading it
	// "without verification" reads those same verified bytes.
	if err := tok.UnsafeClaimsWithoutVerification(dest...); err != nil {
		return reject(ErrMalformed, "claims are not a JSON object of the expected shape: %v", err)
	}
	return nil
}

// maxClockSkew bounds configured skews: beyond a few minutes the clocks are
// broken, and tolerating it would extend every token's life.
const maxClockSkew = 5 * time.Minute

// timeClaims are the registered time claims, as NumericDate so that float
// and integer encodings both decode.
type timeClaims struct {
	Expiry    *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
}

// check enforces exp (required), nbf and iat against now with skew either
// way. A token with no exp would be valid forever, so it is rejected.
func (c timeClaims) check(now time.Time, skew time.Duration) error {
	if c.Expiry == nil {
		return reject(ErrExpired, "token has no exp")
	}
	exp := c.Expiry.Time()
	if now.Add(-skew).After(exp) {
		return reject(ErrExpired, "exp %s is %s before now (skew %s)",
			exp.UTC().Format(time.RFC3339), now.Sub(exp).Round(time.Second), skew)
	}
	if c.NotBefore != nil {
		if nbf := c.NotBefore.Time(); now.Add(skew).Before(nbf) {
			return reject(ErrNotYetValid, "nbf %s is %s after now (skew %s)",
				nbf.UTC().Format(time.RFC3339), nbf.Sub(now).Round(time.Second), skew)
		}
	}
	if c.IssuedAt != nil {
		iat := c.IssuedAt.Time()
		if now.Add(skew).Before(iat) {
			return reject(ErrIssuedAt, "iat %s is %s in the future (skew %s)",
				iat.UTC().Format(time.RFC3339), iat.Sub(now).Round(time.Second), skew)
		}
		if iat.After(exp) {
			return reject(ErrIssuedAt, "iat %s is after exp %s",
				iat.UTC().Format(time.RFC3339), exp.UTC().Format(time.RFC3339))
		}
	}
	return nil
}
