package controlplane

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

// The development issuer mints, for the bootstrap token only and on the
// listener that serves it, a token of the named tenant carrying exactly
// the named rights; every grant stays inside that tenant.
func TestDevIssuerMintsChosenRightsForTheBootstrapTokenOnly(t *testing.T) {
	p := newClusterAuthPlane(t)
	const body = `{"tenant":"t1","subject":"alice","permissions":[{"action":"stream.publish","resource":"t1/default/*"}]}`
	r := p.boot.doToken(t, "POST", "/v1/token/mint", body, testToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	var minted api.ExchangeResponse
	r.decode(t, &minted)
	v, err := auth.NewVerifier(auth.VerifierConfig{Keys: p.tokens})
	require.NoError(t, err)
	claims, err := v.Verify(context.Background(), "t1", minted.Token)
	require.NoError(t, err)
	require.Equal(t, "alice", claims.Subject)
	require.Equal(t, []auth.Permission{{Action: auth.ActionPublish, Resource: "t1/default/*"}}, claims.Perms)
	require.NoError(t, auth.Check(claims, auth.ActionPublish, "t1/default/orders"))
	require.Error(t, auth.Check(claims, auth.ActionSubscribe, "t1/default/orders"))

	admin, _, err := p.tokens.minter.Mint("ops", "root", []auth.Permission{{Action: auth.ActionAdmin, Resource: "ops/*/*"}})
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		in     *instance
		token  string
		body   string
		status int
		says   string
	}{
		{"main listener", p.main, testToken, body, http.StatusUnauthorized, "felix token rejected"},
		{"main listener, operator admin", p.main, admin, body, http.StatusNotFound, "development issuer is off"},
		{"a Felix token, even an operator admin's", p.boot, admin, body, http.StatusUnauthorized, "not the bootstrap token"},
		{"no token", p.boot, "", body, http.StatusUnauthorized, "Authorization"},
		{"another tenant's resource", p.boot, testToken,
			`{"tenant":"t1","subject":"alice","permissions":[{"action":"stream.publish","resource":"ops/default/*"}]}`, http.StatusBadRequest, "permission"},
		{"no permissions", p.boot, testToken, `{"tenant":"t1","subject":"alice","permissions":[]}`, http.StatusBadRequest, "permissions is empty"},
		{"unknown action", p.boot, testToken,
			`{"tenant":"t1","subject":"alice","permissions":[{"action":"stream.steal","resource":"t1/*/*"}]}`, http.StatusBadRequest, "stream.steal"},
		{"unknown tenant", p.boot, testToken,
			`{"tenant":"t9","subject":"alice","permissions":[{"action":"stream.publish","resource":"t9/*/*"}]}`, http.StatusNotFound, "t9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.in.doToken(t, "POST", "/v1/token/mint", c.body, c.token)
			require.Equal(t, c.status, r.status, r.body)
			require.Contains(t, r.body, c.says)
		})
	}
}
