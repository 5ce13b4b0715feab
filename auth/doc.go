// Package auth verifies who a caller is and decides what it may do.
//
// # What it owns
//
//   - IdP trust per tenant (IssuerConfig, TenantConfig): issuer, JWKS URL,
//     audiences, allowed algorithms (RS256, PS256, ES256, EdDSA; never none
//     or HS*), clock skew, and the claim carrying roles or groups.
//   - The JWKS Fetcher: caching bounded by Cache-Control max-age, refresh on
//     an unknown kid rate-limited per URL, one shared in-flight fetch, cached
//     keys kept through IdP outages. Keys without alg are accepted and bound
//     by key type (RSA: RS256/PS256, EC P-256: ES256, Ed25519: EdDSA); the
//     published Felix rejected them and so could not use Microsoft Entra ID.
//   - IdPVerifier: IdP token checks for the control plane's token exchange.
//   - Felix tokens: Minter (per-tenant Ed25519 keys, current and previous,
//     rotation, the tenant JWKS document, minting) and Verifier (local
//     checks against a KeySource: Minter in-process, MemoryKeySource, or
//     JWKSKeySource over the Fetcher for brokers).
//   - RBAC: Permission grants on tenant/namespace/name patterns, Policy
//     mapping IdP roles to Felix roles and permissions, and Check.
//
// # What it must not do
//
// Reach the network except through the Fetcher (docs/design.md, "Packages"), read
// the environment (configuration comes in Config structs), or import the
// broker, control plane or client.
//
// # Threat model
//
// Tokens and JWKS documents are attacker-controlled input; the network
// between brokers, control plane and IdP may fail but TLS keeps it honest.
// An attacker may present any byte string as a token, replay a token of
// another tenant, sign with a key of their own under a known kid, downgrade
// the algorithm (none, or HS256 keyed with an RSA public key), present an
// expired token on a long-lived stream, or flood random kids to make us
// hammer the IdP. Defences: a header pre-check that rejects none and HS*
// before any key is touched; an allowed-algorithm list enforced twice (here
// and by go-jose) and a binding of algorithm to key type; tid read and
// compared before any key lookup and again after verification; the tenant
// segment of every grant literal and checked against the token's tenant;
// exp required and exposed (Claims.Expiry, Claims.Valid) so the broker
// closes streams at expiry; at most one JWKS fetch per URL per
// MinRefreshInterval whatever the input; bounded token and JWKS sizes.
// Out of scope: revocation (Felix tokens are short-lived instead), key
// storage at rest (the control plane's store), and TLS.
//
// # Rejection reasons
//
// Every rejection wraps one sentinel (errors.go) and Reason maps it to a
// stable code: ErrMalformed "malformed", ErrAlgorithm "algorithm",
// ErrUnknownKey "unknown_key", ErrSignature "signature", ErrIssuer "issuer",
// ErrAudience "audience", ErrExpired "expired", ErrNotYetValid
// "not_yet_valid", ErrIssuedAt "issued_at", ErrClaims "claims", ErrTenant
// "tenant", ErrJWKSUnavailable "jwks_unavailable", ErrForbidden "forbidden",
// ErrConfig "config".
//
// # Concurrency
//
// Fetcher, IdPVerifier, Minter, Verifier and MemoryKeySource are safe for
// concurrent use; each has one mutex, and none is held across a network call
// or a call into another of these types, so there is no lock order. The package starts no goroutines: the first caller
// needing a JWKS performs the fetch for all waiters.
package auth
