package controlplane

import (
	"time"

	"github.com/felixmq/felix/auth"
)

// TenantIdP is the identity provider a tenant trusts for the token
// exchange, and how the IdP's roles map to Felix permissions. It is stored
// with the tenant (Tenant.IdP) so that every control plane on one store
// verifies with the same configuration; auth validates it.
type TenantIdP struct {
	Issuer     string   `json:"issuer"`
	JWKSURL    string   `json:"jwks_url"`
	Audiences  []string `json:"audiences"`
	Algorithms []string `json:"algorithms,omitempty"`
	// ClockSkewMS is tolerated on exp, nbf, iat; 0 means auth's default.
	ClockSkewMS int64 `json:"clock_skew_ms,omitempty"`
	// RolesClaim names the claim with the IdP roles or groups ("roles").
	RolesClaim string `json:"roles_claim,omitempty"`
	// Roles maps a Felix role to its permissions; Bindings maps an IdP
	// role or group value to Felix roles (auth.Policy).
	Roles    map[string][]auth.Permission `json:"roles,omitempty"`
	Bindings map[string][]string          `json:"bindings,omitempty"`
}

// authConfig converts the stored form into auth's configuration.
func (c *TenantIdP) authConfig(tenant string) auth.TenantConfig {
	return auth.TenantConfig{
		Tenant: tenant,
		Issuers: []auth.IssuerConfig{{
			Issuer: c.Issuer, JWKSURL: c.JWKSURL, Audiences: c.Audiences, Algorithms: c.Algorithms,
			ClockSkew: time.Duration(c.ClockSkewMS) * time.Millisecond, RolesClaim: c.RolesClaim,
		}},
		Policy: auth.Policy{Roles: c.Roles, Bindings: c.Bindings},
	}
}

// validate runs auth's own validation (through a throwaway verifier, which
// touches no network) so that the API refuses exactly what the exchange
// could not use.
func (c *TenantIdP) validate(tenant string) error {
	if c.ClockSkewMS < 0 {
		return invalid("idp.clock_skew_ms %d must not be negative", c.ClockSkewMS)
	}
	f, err := auth.NewFetcher(auth.FetcherConfig{})
	if err != nil {
		return err
	}
	if _, err := auth.NewIdPVerifier(auth.IdPConfig{Fetcher: f, Tenants: []auth.TenantConfig{c.authConfig(tenant)}}); err != nil {
		return invalid("idp: %v", err)
	}
	return nil
}
