package auth

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	claims := &Claims{Tenant: "t1", Subject: "alice", Perms: []Permission{
		{ActionPublish, "t1/default/orders"},
		{ActionSubscribe, "t1/default/*"},
		{ActionCacheRead, "t1/*/sessions"},
		{ActionAdmin, "t1/ops/*"},
	}}
	cases := []struct {
		name     string
		action   Action
		resource string
		allowed  bool
	}{
		{"exact", ActionPublish, "t1/default/orders", true},
		{"exact with broker kind prefix", ActionPublish, "stream:t1/default/orders", true},
		{"exact name only", ActionPublish, "t1/default/payments", false},
		{"wildcard name", ActionSubscribe, "t1/default/anything", true},
		{"wildcard name, other namespace", ActionSubscribe, "t1/other/anything", false},
		{"wildcard namespace", ActionCacheRead, "cache:t1/eu/sessions", true},
		{"wildcard namespace, other name", ActionCacheRead, "t1/eu/carts", false},
		{"action not granted", ActionCacheWrite, "t1/eu/sessions", false},
		{"admin grants every action", ActionCacheWrite, "t1/ops/x", true},
		{"admin scoped to its pattern", ActionPublish, "t1/default/x", false},
		{"other tenant, same path", ActionPublish, "t2/default/orders", false},
		{"kind does not fit action", ActionPublish, "cache:t1/default/orders", false},
		{"two segments", ActionPublish, "t1/default", false},
		{"four segments", ActionPublish, "t1/default/orders/x", false},
		{"empty segment", ActionPublish, "t1//orders", false},
		{"star is literal in a request", ActionPublish, "t1/*/orders", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(claims, c.action, c.resource)
			if c.allowed {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrForbidden)
			require.Equal(t, "forbidden", Reason(err))
		})
	}
}

func TestCheckNamesTheMissingPermission(t *testing.T) {
	err := Check(&Claims{Tenant: "t1", Subject: "bob"}, ActionPublish, "stream:t1/default/orders")
	require.ErrorIs(t, err, ErrForbidden)
	require.ErrorContains(t, err, "missing permission stream.publish on t1/default/orders")
	require.ErrorIs(t, Check(nil, ActionPublish, "t1/a/b"), ErrForbidden)
}

// A token for tenant A never authorizes tenant B, even with a grant that a
// broken mint let through.
func TestCheckCrossTenant(t *testing.T) {
	claims := &Claims{Tenant: "t1", Perms: []Permission{{ActionAdmin, "t2/*/*"}}}
	err := Check(claims, ActionPublish, "t2/default/orders")
	require.ErrorIs(t, err, ErrForbidden)
	require.ErrorContains(t, err, `tenant "t1" cannot act on tenant "t2"`)
}

func TestPermissionValidate(t *testing.T) {
	for _, c := range []struct {
		p  Permission
		ok bool
	}{
		{Permission{ActionPublish, "t1/ns/s"}, true},
		{Permission{ActionPublish, "t1/*/*"}, true},
		{Permission{ActionAdmin, "t1/ns/*"}, true},
		{Permission{"stream.delete_everything", "t1/ns/s"}, false},
		{Permission{ActionPublish, "*/ns/s"}, false},
		{Permission{ActionPublish, "t2/ns/s"}, false},
		{Permission{ActionPublish, "t1/ord*/s"}, false},
		{Permission{ActionPublish, "t1/ns"}, false},
		{Permission{ActionPublish, ""}, false},
	} {
		err := c.p.Validate("t1")
		if c.ok {
			require.NoError(t, err, c.p.String())
		} else {
			require.ErrorIs(t, err, ErrConfig, c.p.String())
		}
	}
}

func TestPolicyMapsIdPRolesToPermissions(t *testing.T) {
	p := Policy{
		Roles: map[string][]Permission{
			"publisher": {{ActionPublish, "t1/default/*"}},
			"reader":    {{ActionSubscribe, "t1/default/*"}, {ActionCacheRead, "t1/*/*"}},
			"both":      {{ActionPublish, "t1/default/*"}},
		},
		Bindings: map[string][]string{
			"Felix.Publisher": {"publisher"},
			"Felix.Reader":    {"reader", "both"},
		},
	}
	require.NoError(t, p.Validate("t1"))
	require.Equal(t, []Permission{
		{ActionCacheRead, "t1/*/*"},
		{ActionPublish, "t1/default/*"},
		{ActionSubscribe, "t1/default/*"},
	}, p.Grants([]string{"Felix.Reader", "Felix.Publisher", "Unrelated"}), "deduplicated and sorted")
	require.Empty(t, p.Grants([]string{"Unrelated"}))

	p.Bindings["Oops"] = []string{"no-such-role"}
	require.ErrorIs(t, p.Validate("t1"), ErrConfig)
	require.ErrorIs(t, Policy{Roles: map[string][]Permission{"x": {{ActionPublish, "t2/a/b"}}}}.Validate("t1"), ErrConfig)
}
