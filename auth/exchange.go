package auth

import (
	"context"
	"slices"
)

// Grants returns the permissions identity earns under its tenant's Policy.
func (v *IdPVerifier) Grants(id *Identity) []Permission {
	tt := v.tenant(id.Tenant)
	if tt == nil {
		return nil
	}
	return tt.policy.Grants(id.Roles)
}

// Exchange is the control plane's token exchange: verify the IdP token for
// tenant, map its roles to permissions, optionally narrow them to the
// requested actions (never widen), and mint a Felix token for the identity's
// Principal. An identity whose roles earn nothing gets ErrForbidden rather
// than an empty token.
func Exchange(ctx context.Context, v *IdPVerifier, m *Minter, tenant, idpToken string, requested []Action) (string, *Claims, error) {
	id, err := v.Verify(ctx, tenant, idpToken)
	if err != nil {
		return "", nil, err
	}
	perms := v.Grants(id)
	if len(requested) > 0 {
		perms = slices.DeleteFunc(perms, func(p Permission) bool {
			return !slices.Contains(requested, p.Action)
		})
	}
	if len(perms) == 0 {
		return "", nil, reject(ErrForbidden, "roles %q of %q in tenant %q grant no permissions%s",
			id.Roles, id.Subject, tenant, narrowed(requested))
	}
	return m.Mint(tenant, id.Principal, perms)
}

func narrowed(requested []Action) string {
	if len(requested) == 0 {
		return ""
	}
	return " among the requested actions"
}
