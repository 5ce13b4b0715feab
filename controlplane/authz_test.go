package controlplane

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane/api"
)

// With no Authorizer configured, every protected endpoint refuses: the
// admin API is never open by default. Health and the OpenAPI document stay
// readable.
func TestDefaultRefusesEverything(t *testing.T) {
	in := newInstance(t, nil, nil)
	for _, rt := range in.srv.routes {
		path := samplePath(rt.pattern)
		r := in.doToken(t, rt.method, path, `{"tenant":"t1"}`, "anything")
		if rt.pattern == "/v1/system/health" || rt.pattern == "/v1/openapi.json" {
			require.Equal(t, http.StatusOK, r.status, "%s %s", rt.method, path)
			continue
		}
		if publicRoutes[rt.method+" "+rt.pattern] {
			// The IdP token is the exchange's credential; a JWKS is
			// public. They answer for themselves (bad request, not found).
			require.NotEqual(t, http.StatusOK, r.status, "%s %s: %s", rt.method, path, r.body)
			continue
		}
		require.Equal(t, http.StatusUnauthorized, r.status, "%s %s: %s", rt.method, path, r.body)
		require.Contains(t, r.body, "no authorizer configured")
	}
}

func TestBootstrapAuthorizer(t *testing.T) {
	in := newBootstrapInstance(t, nil)
	for _, tc := range []struct {
		name, header, want string
	}{
		{"no header", "", `missing Authorization header: want "Bearer <token>"`},
		{"wrong scheme", "Basic " + testToken, `Authorization header is not "Bearer <token>"`},
		{"empty bearer", "Bearer ", `Authorization header is not "Bearer <token>"`},
		{"wrong token", "Bearer " + testToken + "x", "bearer token is not the bootstrap token"},
		{"prefix of token", "Bearer " + testToken[:10], "bearer token is not the bootstrap token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", in.url+"/v1/tenants", stringsBody(`{"tenant":"t1"}`))
			require.NoError(t, err)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			r := reply{status: resp.StatusCode, body: readAll(t, resp)}
			require.Equal(t, http.StatusUnauthorized, r.status, r.body)
			var e api.ErrorBody
			r.decode(t, &e)
			require.Equal(t, "unauthenticated", e.Code)
			require.Equal(t, tc.want, e.Message)
			require.Equal(t, `Bearer realm="felix-controlplane"`, resp.Header.Get("WWW-Authenticate"))
		})
	}
	in.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", `{"tenant":"t1"}`)
	in.mustDo(t, http.StatusOK, "GET", "/v1/tenants", "")

	_, err := NewBootstrapAuthorizer("  short\n")
	require.ErrorIs(t, err, ErrInvalid)
	a, err := NewBootstrapAuthorizer(testToken + "\n")
	require.NoError(t, err, "a token file's final newline is not part of the token")
	req, _ := http.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "bearer "+testToken)
	require.NoError(t, a.Authorize(req, ActionTenantView, "tenant:*"), "the scheme is case-insensitive")
}

// Each endpoint asks the Authorizer about the right action and resource;
// 403 and unexpected authorizer errors are mapped precisely.
func TestAuthorizerSeesActionAndResource(t *testing.T) {
	var asked []string
	allow := AuthorizerFunc(func(_ *http.Request, action, resource string) error {
		asked = append(asked, action+" "+resource)
		switch resource {
		case "stream:t1/ns/secret":
			return Forbidden("missing permission %s on %s", action, resource)
		case "stream:t1/ns/broken":
			return errors.New("verifier exploded")
		}
		return nil
	})
	in := newInstance(t, nil, allow)
	in.seed(t)
	for _, tc := range []struct {
		method, path, body, want string
	}{
		{"POST", "/v1/tenants", `{"tenant":"t2"}`, "tenant.manage tenant:t2"},
		{"GET", "/v1/tenants", "", "tenant.view tenant:*"},
		{"GET", "/v1/tenants/t1", "", "tenant.view tenant:t1"},
		{"DELETE", "/v1/tenants/t2", "", "tenant.manage tenant:t2"},
		{"POST", nsURL, `{"namespace":"n2"}`, "ns.manage namespace:t1/n2"},
		{"GET", nsURL, "", "ns.view namespace:t1/*"},
		{"GET", nsURL + "/ns", "", "ns.view namespace:t1/ns"},
		{"POST", streamsURL, `{"stream":"s"}`, "stream.manage stream:t1/ns/s"},
		{"GET", streamsURL, "", "stream.view stream:t1/ns/*"},
		{"GET", streamsURL + "/s", "", "stream.view stream:t1/ns/s"},
		{"DELETE", streamsURL + "/s", "", "stream.manage stream:t1/ns/s"},
		{"POST", cachesURL, `{"cache":"c"}`, "cache.manage cache:t1/ns/c"},
		{"GET", cachesURL, "", "cache.view cache:t1/ns/*"},
		{"GET", "/v1/snapshot", "", "controlplane.watch cluster:*"},
		{"GET", "/v1/changes", "", "controlplane.watch cluster:*"},
	} {
		asked = nil
		r := in.do(t, tc.method, tc.path, tc.body)
		require.Less(t, r.status, 300, "%s %s: %s", tc.method, tc.path, r.body)
		require.Equal(t, []string{tc.want}, asked, "%s %s", tc.method, tc.path)
	}
	r := in.mustDo(t, http.StatusForbidden, "POST", streamsURL, `{"stream":"secret"}`)
	require.Contains(t, r.body, `"code": "forbidden"`)
	require.Contains(t, r.body, "missing permission stream.manage on stream:t1/ns/secret")
	// Forbidden comes before existence: a caller without rights cannot
	// probe which names exist.
	in.mustDo(t, http.StatusForbidden, "GET", streamsURL+"/secret", "")

	r = in.mustDo(t, http.StatusInternalServerError, "POST", streamsURL, `{"stream":"broken"}`)
	require.Contains(t, r.body, `"code": "internal"`)
	require.NotContains(t, r.body, "exploded", "internal causes stay in the log")
}

var publicRoutes = map[string]bool{
	"POST /v1/token/exchange":                        true,
	"GET /v1/tenants/{tenant}/.well-known/jwks.json": true,
}

// TestAuthenticationBeforeTheBody: an unauthenticated POST /v1/tenants
// with an unknown field got 400 "unknown field": the body was decoded and
// validated before the credential was checked. Every create (and the node
// credential mint) now refuses a missing or invalid credential with 401
// before it reads the body; with a valid one the body's faults are 400.
func TestAuthenticationBeforeTheBody(t *testing.T) {
	in := newBootstrapInstance(t, nil)
	in.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", `{"tenant":"t1"}`)
	for _, c := range []struct{ path, body string }{
		{"/v1/tenants", `{"tenant":"t2","bogus":1}`},
		{"/v1/tenants/t1/namespaces", `{"tenant":"t1","namespace":"n","bogus":1}`},
		{"/v1/tenants/t1/namespaces/n/streams", `not json at all`},
		{"/v1/token/node", `{"subject":"b1","bogus":1}`},
	} {
		for _, token := range []string{"", "not-the-token-0123456789"} {
			r := in.doToken(t, "POST", c.path, c.body, token)
			require.Equal(t, http.StatusUnauthorized, r.status, "%s %q: %s", c.path, token, r.body)
			require.NotContains(t, r.body, "bogus")
		}
	}
	r := in.do(t, "POST", "/v1/tenants", `{"tenant":"t2","bogus":1}`)
	require.Equal(t, http.StatusBadRequest, r.status, r.body)
	require.Contains(t, r.body, "bogus")
}
