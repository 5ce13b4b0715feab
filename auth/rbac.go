package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Action is an operation a permission grants. The data-path names are the
// published Felix's RBAC actions.
type Action string

const (
	ActionPublish     Action = "stream.publish"
	ActionSubscribe   Action = "stream.subscribe"
	ActionCacheRead   Action = "cache.read"
	ActionCacheWrite  Action = "cache.write"
	ActionStreamAdmin Action = "stream.manage"
	ActionCacheAdmin  Action = "cache.manage"
	ActionNamespace   Action = "ns.manage"
	ActionRosterJoin  Action = "roster.join"
	ActionRosterWatch Action = "roster.watch"
	// ActionQueueConsume consumes a durable stream in a consumer group; its
	// resource is the stream's name as "queue:tenant/namespace/stream".
	ActionQueueConsume Action = "queue.consume"
	// ActionQueueManage moves or forgets a consumer group (group_seek,
	// group_delete) and its dead letters (group_discard, group_redrive),
	// on the same resource as ActionQueueConsume.
	ActionQueueManage Action = "queue.manage"
	// ActionClusterNode is a broker's node credential: it registers the
	// broker with the control plane and keeps its lease. It is granted on
	// the operator tenant ("op/*/*") only.
	ActionClusterNode Action = "cluster.node"
	// ActionAdmin grants every action on the resources it matches.
	ActionAdmin Action = "admin"
)

var knownActions = []Action{ActionPublish, ActionSubscribe, ActionCacheRead, ActionCacheWrite,
	ActionStreamAdmin, ActionCacheAdmin, ActionNamespace, ActionRosterJoin, ActionRosterWatch,
	ActionQueueConsume, ActionQueueManage, ActionClusterNode, ActionAdmin}

// Permission grants Action on every resource matching Resource, a pattern
// "tenant/namespace/name" in which a segment may be "*" (any one segment).
// The tenant segment is always literal: no grant spans tenants.
type Permission struct {
	Action   Action `json:"action"`
	Resource string `json:"resource"`
}

func (p Permission) String() string { return string(p.Action) + " on " + p.Resource }

// Validate checks p for use in tenant's tokens and policies.
func (p Permission) Validate(tenant string) error {
	if !slices.Contains(knownActions, p.Action) {
		return reject(ErrConfig, "permission %s: unknown action %q", p, p.Action)
	}
	seg, ok := splitResource(p.Resource)
	if !ok {
		return reject(ErrConfig, "permission %s: resource must be tenant/namespace/name", p)
	}
	if seg[0] != tenant {
		return reject(ErrConfig, "permission %s: tenant segment must be %q", p, tenant)
	}
	for _, s := range seg[1:] {
		if s != "*" && strings.Contains(s, "*") {
			return reject(ErrConfig, "permission %s: * stands for a whole segment, not part of one", p)
		}
	}
	return nil
}

// splitResource splits "t/ns/name" into its three non-empty segments.
func splitResource(r string) ([3]string, bool) {
	var seg [3]string
	a, rest, ok1 := strings.Cut(r, "/")
	b, c, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || a == "" || b == "" || c == "" || strings.Contains(c, "/") {
		return seg, false
	}
	seg[0], seg[1], seg[2] = a, b, c
	return seg, true
}

// actionKind is the resource kind an action applies to, for resources given
// in the broker's "kind:tenant/namespace/name" form.
func actionKind(a Action) string {
	kind, _, _ := strings.Cut(string(a), ".")
	return kind
}

// Check returns nil if claims grant action on resource, else an error
// wrapping ErrForbidden that names the missing permission. resource is
// "tenant/namespace/name", optionally prefixed by its kind as the broker
// writes it ("stream:t1/default/orders"); the kind must fit the action.
// Wildcards in resource are literal characters here: a request names one
// concrete thing.
func Check(claims *Claims, action Action, resource string) error {
	if claims == nil {
		return reject(ErrForbidden, "no credentials for %s on %s", action, resource)
	}
	path := resource
	if kind, rest, ok := strings.Cut(resource, ":"); ok {
		if kind != actionKind(action) && action != ActionAdmin {
			return reject(ErrForbidden, "%s does not apply to a %s resource (%s)", action, kind, resource)
		}
		path = rest
	}
	seg, ok := splitResource(path)
	if !ok {
		return reject(ErrForbidden, "resource %q is not tenant/namespace/name", resource)
	}
	if seg[0] != claims.Tenant {
		return reject(ErrForbidden, "token of tenant %q cannot act on tenant %q (%s)", claims.Tenant, seg[0], resource)
	}
	for _, p := range claims.Perms {
		if (p.Action == action || p.Action == ActionAdmin) && matches(p.Resource, seg) {
			return nil
		}
	}
	return reject(ErrForbidden, "missing permission %s on %s (subject %q)", action, path, claims.Subject)
}

// matches reports whether pattern matches the resource segments. A pattern
// that is not three segments matches nothing.
func matches(pattern string, seg [3]string) bool {
	pat, ok := splitResource(pattern)
	if !ok || pat[0] != seg[0] { // the tenant is never a wildcard
		return false
	}
	return (pat[1] == "*" || pat[1] == seg[1]) && (pat[2] == "*" || pat[2] == seg[2])
}

// Policy is a tenant's role-based access control: Felix roles and the IdP
// role or group values bound to them.
type Policy struct {
	// Roles maps a Felix role name to the permissions it grants.
	Roles map[string][]Permission
	// Bindings maps a value of the issuer's RolesClaim (an Entra app role,
	// an Okta group) to Felix role names.
	Bindings map[string][]string
}

// Validate checks that every permission is valid for tenant and every binding
// names a defined role.
func (p Policy) Validate(tenant string) error {
	for role, perms := range p.Roles {
		for _, perm := range perms {
			if err := perm.Validate(tenant); err != nil {
				return fmt.Errorf("tenant %q role %q: %w", tenant, role, err)
			}
		}
	}
	for value, roles := range p.Bindings {
		for _, r := range roles {
			if _, ok := p.Roles[r]; !ok {
				return reject(ErrConfig, "tenant %q: binding %q names undefined role %q", tenant, value, r)
			}
		}
	}
	return nil
}

// Grants returns the permissions that idpRoles earn, deduplicated and in a
// stable order so that equal identities mint equal tokens.
func (p Policy) Grants(idpRoles []string) []Permission {
	var out []Permission
	for _, v := range idpRoles {
		for _, r := range p.Bindings[v] {
			for _, perm := range p.Roles[r] {
				if !slices.Contains(out, perm) {
					out = append(out, perm)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Permission) int {
		if c := strings.Compare(string(a.Action), string(b.Action)); c != 0 {
			return c
		}
		return strings.Compare(a.Resource, b.Resource)
	})
	return out
}
