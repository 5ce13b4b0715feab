package broker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/felixmq/felix/auth"
)

// TokenVerifier checks Felix EdDSA tokens locally with auth.Verifier: the
// data path never calls the control plane (its keys come from the
// verifier's key source, cached). Each auth frame is verified for
// signature, audience, tenant and expiry; each operation then against the
// token's permissions; the streams it authenticated end when it expires.
type TokenVerifier struct {
	V *auth.Verifier
	// ClockSkew is V's tolerance past a token's exp (its
	// VerifierConfig.ClockSkew): streams end when V would start refusing
	// the token, not before, so a client never sees a token accepted at
	// auth and then its stream ended at once.
	ClockSkew time.Duration
}

// Verify implements Verifier. A refusal names auth's reason and its
// detail, without the URLs it may hold (a JWKS address inside the
// deployment is not for an unauthenticated peer); the broker's log has
// the whole cause (AuthError.Cause).
func (t TokenVerifier) Verify(ctx context.Context, tenant, token string) (Principal, error) {
	c, err := t.V.Verify(ctx, tenant, token)
	if err != nil {
		return nil, &AuthError{Reason: auth.Reason(err), cause: err}
	}
	return tokenPrincipal{c: c, skew: t.ClockSkew}, nil
}

// AuthError is a token the verifier refused: Error is what the peer is
// told, Cause what the broker logs.
type AuthError struct {
	Reason string // auth.Reason: "expired", "unknown_key", ...
	cause  error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrAuth, e.Reason, urlPattern.ReplaceAllString(e.cause.Error(), "<url>"))
}

// Unwrap makes errors.Is(err, ErrAuth) and the auth sentinels work.
func (e *AuthError) Unwrap() []error { return []error{ErrAuth, e.cause} }

// Cause is the refusal as auth gave it, URLs included.
func (e *AuthError) Cause() error { return e.cause }

var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'()]+`)

// logDetail is what the log says of an auth refusal: the whole cause.
func logDetail(err error) string {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae.cause.Error()
	}
	return err.Error()
}

type tokenPrincipal struct {
	c    *auth.Claims
	skew time.Duration
}

func (p tokenPrincipal) Tenant() string    { return p.c.Tenant }
func (p tokenPrincipal) Subject() string   { return p.c.Subject }
func (p tokenPrincipal) Expiry() time.Time { return p.c.Expiry.Add(p.skew) }
func (p tokenPrincipal) Check(a auth.Action, resource string) error {
	return auth.Check(p.c, a, resource)
}

// forbidden is the refusal of action on what, with the principal's reason.
func forbidden(err error, action auth.Action, what string) error {
	if errors.Is(err, ErrForbidden) {
		return err
	}
	return fmt.Errorf("%w: %s on %s: %w", ErrForbidden, action, what, err)
}

// errTokenExpired is why a stream ends at its token's expiry.
var errTokenExpired = fmt.Errorf("%w: token expired; authenticate a new stream", ErrAuth)

// atExpiry calls end when p's credential expires, unless the returned stop
// is called first. A principal without expiry arms nothing.
func atExpiry(p Principal, end func()) (stop func()) {
	exp := p.Expiry()
	if exp.IsZero() {
		return func() {}
	}
	t := time.AfterFunc(time.Until(exp), end)
	return func() { t.Stop() }
}

// authorize checks that the stream's principal may do action on resource
// of tenant; the error names what is missing.
func (ct *control) authorize(tenant string, action auth.Action, resource string) error {
	if tenant != ct.principal.Tenant() {
		return fmt.Errorf("%w: %s on %s: %w", ErrForbidden, action, resource, errTenantMismatch)
	}
	if err := ct.principal.Check(action, resource); err != nil {
		return forbidden(err, action, resource)
	}
	return nil
}
