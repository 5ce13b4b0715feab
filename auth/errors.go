package auth

import (
	"errors"
	"fmt"
)

// The rejection reasons. Every error this package returns for a token, a JWKS
// or an RBAC check wraps exactly one of these, with detail after the colon, so
// callers map them to wire or HTTP codes with errors.Is and operators read the
// detail in logs. Reason returns a short stable code for each.
var (
	// ErrMalformed: not a compact JWS, bad base64 or JSON, oversized, or a
	// header the package does not understand (crit, missing alg).
	ErrMalformed = errors.New("auth: malformed token")
	// ErrAlgorithm: alg is none, HS*, not in the configured list, or does
	// not fit the type of the key named by kid (algorithm confusion).
	ErrAlgorithm = errors.New("auth: algorithm not allowed")
	// ErrUnknownKey: no kid, or a kid the key source does not know even
	// after the one refresh it is allowed.
	ErrUnknownKey = errors.New("auth: unknown signing key")
	// ErrSignature: the signature does not verify with the named key.
	ErrSignature = errors.New("auth: invalid signature")
	// ErrIssuer: iss is missing or not the configured issuer.
	ErrIssuer = errors.New("auth: issuer not allowed")
	// ErrAudience: aud does not contain any configured audience.
	ErrAudience = errors.New("auth: audience not allowed")
	// ErrExpired: exp is missing or in the past beyond the clock skew.
	ErrExpired = errors.New("auth: token expired")
	// ErrNotYetValid: nbf is in the future beyond the clock skew.
	ErrNotYetValid = errors.New("auth: token not yet valid")
	// ErrIssuedAt: iat is in the future beyond the clock skew, or later
	// than exp.
	ErrIssuedAt = errors.New("auth: implausible issued-at")
	// ErrClaims: a required claim (sub, tid, perms) is missing or invalid.
	ErrClaims = errors.New("auth: invalid claims")
	// ErrTenant: the token belongs to another tenant than the one it is
	// presented for, or the tenant is unknown.
	ErrTenant = errors.New("auth: tenant mismatch")
	// ErrJWKSUnavailable: the JWKS could not be fetched or parsed and no
	// cached copy holds the key.
	ErrJWKSUnavailable = errors.New("auth: JWKS unavailable")
	// ErrForbidden: the token is valid but grants no permission for the
	// action on the resource.
	ErrForbidden = errors.New("auth: forbidden")
	// ErrConfig: a Config failed validation.
	ErrConfig = errors.New("auth: invalid configuration")
)

var reasons = []struct {
	err  error
	code string
}{
	{ErrMalformed, "malformed"},
	{ErrAlgorithm, "algorithm"},
	{ErrUnknownKey, "unknown_key"},
	{ErrSignature, "signature"},
	{ErrIssuer, "issuer"},
	{ErrAudience, "audience"},
	{ErrExpired, "expired"},
	{ErrNotYetValid, "not_yet_valid"},
	{ErrIssuedAt, "issued_at"},
	{ErrClaims, "claims"},
	{ErrTenant, "tenant"},
	{ErrJWKSUnavailable, "jwks_unavailable"},
	{ErrForbidden, "forbidden"},
	{ErrConfig, "config"},
}

// Reason returns a short, stable code for err ("expired", "audience", ...)
// for metrics labels and protocol error codes, or "" if err is not one of the
// package's rejection reasons.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return ""
}

// reject wraps a sentinel with detail: "auth: token expired: exp 12:00:00 is
// 5m0s ago (skew 1m0s)".
func reject(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
