package controlplane

import (
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

// idpAuthConfig converts a tenant's stored IdP into auth's configuration.
func idpAuthConfig(c *api.TenantIdP, tenant string) auth.TenantConfig {
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
func validateIdP(c *api.TenantIdP, tenant string) error {
	if c.ClockSkewMS < 0 {
		return invalid("idp.clock_skew_ms %d must not be negative", c.ClockSkewMS)
	}
	f, err := auth.NewFetcher(auth.FetcherConfig{})
	if err != nil {
		return err
	}
	if _, err := auth.NewIdPVerifier(auth.IdPConfig{Fetcher: f, Tenants: []auth.TenantConfig{idpAuthConfig(c, tenant)}}); err != nil {
		return invalid("idp: %v", err)
	}
	return nil
}
