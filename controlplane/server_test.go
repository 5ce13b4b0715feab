package controlplane

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane/api"
)

// apiStep is one request of the API suite and what it must answer. The
// steps run in order against one fresh control plane, so later steps see
// what earlier ones created.
type apiStep struct {
	name   string
	method string
	path   string
	body   string
	status int
	code   string // error code, for errors
	want   string // substring of the body (the precise message for errors)
}

const (
	nsURL     = "/v1/tenants/t1/namespaces"
	cachesURL = "/v1/tenants/t1/namespaces/ns/caches"
)

var apiSuite = []apiStep{
	// Tenants and namespaces.
	{"create tenant", "POST", "/v1/tenants", `{"tenant":"t1","display_name":"Tenant one"}`, 201, "", `"display_name": "Tenant one"`},
	{"duplicate tenant", "POST", "/v1/tenants", `{"tenant":"t1"}`, 409, "already_exists", "tenant t1 already exists"},
	{"get tenant", "GET", "/v1/tenants/t1", "", 200, "", `"tenant": "t1"`},
	{"list tenants", "GET", "/v1/tenants", "", 200, "", `"tenants": [`},
	{"missing tenant", "GET", "/v1/tenants/t9", "", 404, "not_found", "tenant t9 not found"},
	{"namespace in missing tenant", "POST", "/v1/tenants/t9/namespaces", `{"namespace":"ns"}`, 404, "not_found", "tenant t9 not found: create it first"},
	{"create namespace", "POST", nsURL, `{"namespace":"ns"}`, 201, "", `"tenant": "t1"`},
	{"namespace tenant mismatch", "POST", nsURL, `{"tenant":"t2","namespace":"x"}`, 400, "bad_request", `tenant "t2" in the body does not match "t1" in the path`},
	{"list namespaces", "GET", nsURL, "", 200, "", `"namespace": "ns"`},
	{"list namespaces of missing tenant", "GET", "/v1/tenants/t9/namespaces", "", 404, "not_found", "tenant t9 not found"},
	{"invalid tenant in path", "GET", "/v1/tenants/b*d", "", 400, "bad_request", `tenant "b*d" has '*' at byte 1`},

	// Streams.
	{"create durable stream", "POST", streamsURL, `{"stream":"orders","shards":4,"durable":true,"fsync":"on_commit","retention_bytes":1048576,"retention_ms":60000}`, 201, "", `"fsync": "on_commit"`},
	{"stream defaults", "POST", streamsURL, `{"stream":"ticks"}`, 201, "", `"shards": 1,`},
	{"durable fsync default", "POST", streamsURL, `{"stream":"audit","durable":true}`, 201, "", `"fsync": "periodic"`},
	{"duplicate stream", "POST", streamsURL, `{"stream":"orders"}`, 409, "already_exists", "stream t1/ns/orders already exists"},
	{"get stream", "GET", streamsURL + "/orders", "", 200, "", `"retention_bytes": 1048576`},
	{"list streams", "GET", streamsURL, "", 200, "", `"stream": "ticks"`},
	{"stream in missing namespace", "POST", "/v1/tenants/t1/namespaces/nope/streams", `{"stream":"x"}`, 404, "not_found", "namespace t1/nope not found: create it first"},
	{"list streams of missing namespace", "GET", "/v1/tenants/t1/namespaces/nope/streams", "", 404, "not_found", "namespace t1/nope not found"},
	{"malformed JSON", "POST", streamsURL, `{"stream":"x",}`, 400, "bad_request", "malformed JSON at byte offset 14: invalid character '}'"},
	{"truncated JSON", "POST", streamsURL, `{"stream":"x"`, 400, "bad_request", "malformed JSON: body ends in the middle of a value"},
	{"empty body", "POST", streamsURL, ``, 400, "bad_request", "empty body: want a JSON object"},
	{"not an object", "POST", streamsURL, `[1]`, 400, "bad_request", "body is a JSON array: want a JSON object"},
	{"trailing data", "POST", streamsURL, `{"stream":"x"} {}`, 400, "bad_request", "unexpected data after the object"},
	{"unknown field", "POST", streamsURL, `{"stream":"x","shard":2}`, 400, "bad_request", `unknown field "shard"`},
	{"wrong type", "POST", streamsURL, `{"stream":"x","shards":"4"}`, 400, "bad_request", `field "shards": want an integer, got JSON string`},
	{"name with slash", "POST", streamsURL, `{"stream":"a/b"}`, 400, "bad_request", `stream "a/b" has '/' at byte 1`},
	{"name missing", "POST", streamsURL, `{"shards":2}`, 400, "bad_request", "stream is missing"},
	{"name too long", "POST", streamsURL, `{"stream":"` + string(make65()) + `"}`, 400, "bad_request", "is 65 bytes long"},
	{"zero shards", "POST", streamsURL, `{"stream":"x","shards":0}`, 400, "bad_request", "shards 0 not in [1, 1024]"},
	{"too many shards", "POST", streamsURL, `{"stream":"x","shards":1025}`, 400, "bad_request", "shards 1025 not in [1, 1024]"},
	{"fsync on ephemeral", "POST", streamsURL, `{"stream":"x","fsync":"never"}`, 400, "bad_request", `fsync "never" applies to durable resources only`},
	{"unknown fsync", "POST", streamsURL, `{"stream":"x","durable":true,"fsync":"always"}`, 400, "bad_request", `fsync "always": want on_commit, periodic or never`},
	{"retention on ephemeral", "POST", streamsURL, `{"stream":"x","retention_ms":5}`, 400, "bad_request", "apply to durable streams only"},
	{"negative retention", "POST", streamsURL, `{"stream":"x","durable":true,"retention_bytes":-1}`, 400, "bad_request", "retention_bytes -1 must not be negative"},
	{"revision in body", "POST", streamsURL, `{"stream":"x","revision":3}`, 400, "bad_request", "revision is assigned by the server"},
	{"unknown routing", "POST", streamsURL, `{"stream":"x","shards":8,"routing":"ring"}`, 400, "bad_request", `routing "ring": want modulo or jump_hash`},
	{"jump hash routing", "POST", streamsURL, `{"stream":"jumpy","shards":8,"routing":"jump_hash"}`, 201, "", `"routing": "jump_hash"`},
	{"one replica", "POST", streamsURL, `{"stream":"single","durable":true,"replicas":1}`, 201, "", `"stream": "single"`},
	{"replicas not odd", "POST", streamsURL, `{"stream":"x","durable":true,"replicas":2}`, 400, "bad_request", "replicas 2: want 1, 3 or 5"},
	{"negative replicas", "POST", streamsURL, `{"stream":"x","durable":true,"replicas":-3}`, 400, "bad_request", "replicas -3: want 1, 3 or 5"},
	{"replicas on ephemeral", "POST", streamsURL, `{"stream":"x","replicas":3}`, 400, "bad_request", "replicas 3: only a durable stream is replicated (set durable: true)"},
	{"ack without replicas", "POST", streamsURL, `{"stream":"x","durable":true,"ack":"quorum"}`, 400, "bad_request", `ack "quorum" applies to replicated streams only`},
	{"unknown ack", "POST", streamsURL, `{"stream":"x","durable":true,"replicas":3,"ack":"all"}`, 400, "bad_request", `ack "all": want leader or quorum`},
	{"replicas without brokers", "POST", streamsURL, `{"stream":"x","durable":true,"replicas":3}`, 400, "bad_request", "stream needs 3 replicas; 0 brokers are live"},
	{"namespace mismatch", "POST", streamsURL, `{"namespace":"other","stream":"x"}`, 400, "bad_request", `namespace "other" in the body does not match "ns" in the path`},

	// Caches.
	{"create cache", "POST", cachesURL, `{"cache":"sessions","max_entries":1000,"max_bytes":1048576}`, 201, "", `"max_entries": 1000`},
	{"durable cache", "POST", cachesURL, `{"cache":"profiles","durable":true,"fsync":"never"}`, 201, "", `"fsync": "never"`},
	{"negative max_entries", "POST", cachesURL, `{"cache":"x","max_entries":-5}`, 400, "bad_request", "max_entries -5 must not be negative"},
	{"get cache", "GET", cachesURL + "/sessions", "", 200, "", `"max_bytes": 1048576`},
	{"list caches", "GET", cachesURL, "", 200, "", `"cache": "profiles"`},

	// Deletion.
	{"delete non-empty namespace", "DELETE", nsURL + "/ns", "", 409, "not_empty", "namespace t1/ns is not empty"},
	{"delete non-empty tenant", "DELETE", "/v1/tenants/t1", "", 409, "not_empty", "tenant t1 is not empty"},
	{"delete stream", "DELETE", streamsURL + "/orders", "", 200, "", `"key": "t1/ns/orders"`},
	{"delete stream again", "DELETE", streamsURL + "/orders", "", 404, "not_found", "stream t1/ns/orders not found"},
	{"get deleted stream", "GET", streamsURL + "/orders", "", 404, "not_found", "stream t1/ns/orders not found"},

	// Routing and query parameters.
	{"unknown route", "GET", "/v1/nothing", "", 404, "not_found", "no endpoint GET /v1/nothing"},
	{"wrong method", "PUT", "/v1/tenants", "", 405, "method_not_allowed", "method PUT not allowed on /v1/tenants (allowed: GET, POST)"},
	{"negative cursor", "GET", "/v1/changes?cursor=-1", "", 400, "bad_request", "query parameter cursor=-1: not in [0,"},
	{"cursor not a number", "GET", "/v1/changes?cursor=abc", "", 400, "bad_request", `query parameter cursor="abc": want an integer`},
	{"limit too large", "GET", "/v1/changes?limit=5000", "", 400, "bad_request", "query parameter limit=5000: not in [1, 1000]"},
	{"bad wait", "GET", "/v1/changes?wait=30", "", 400, "bad_request", `query parameter wait="30": want a duration such as 30s`},
	{"wait too long", "GET", "/v1/changes?wait=2h", "", 400, "bad_request", "query parameter wait=2h: not in [0s, 1m0s]"},
	{"health", "GET", "/v1/system/health", "", 200, "", `"status": "ok"`},
}

func make65() []byte {
	b := make([]byte, 65)
	for i := range b {
		b[i] = 'a'
	}
	return b
}

// TestAPISuite runs every step over real HTTP against each store backend.
func TestAPISuite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newBootstrapInstance(t, open(t))
		for _, s := range apiSuite {
			r := in.do(t, s.method, s.path, s.body)
			require.Equal(t, s.status, r.status, "%s: %s %s: %s", s.name, s.method, s.path, r.body)
			id := r.header.Get(RequestIDHeader)
			require.NotEmpty(t, id, "%s: every response carries a request id", s.name)
			if s.code == "" {
				require.Contains(t, r.body, s.want, s.name)
				continue
			}
			var e api.ErrorBody
			r.decode(t, &e)
			require.Equal(t, s.code, e.Code, s.name)
			require.Contains(t, e.Message, s.want, s.name)
			require.Equal(t, id, e.RequestID, "%s: the body repeats the header's request id", s.name)
		}
	})
}

// Request ids differ between requests.
func TestRequestIDsAreUnique(t *testing.T) {
	in := newBootstrapInstance(t, nil)
	seen := map[string]bool{}
	for range 20 {
		id := in.do(t, "GET", "/v1/tenants", "").header.Get(RequestIDHeader)
		require.False(t, seen[id], "request id %s repeated", id)
		seen[id] = true
	}
}

func TestBodyTooLarge(t *testing.T) {
	srv, err := New(Config{Authorizer: AuthorizerFunc(func(*http.Request, string, string) error { return nil }), MaxBodyBytes: 64})
	require.NoError(t, err)
	defer srv.Close()
	in := &instance{srv: srv}
	hs := newHTTPServer(t, srv)
	in.url = hs
	r := in.do(t, "POST", "/v1/tenants", `{"tenant":"t1","display_name":"`+string(make65())+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.body)
	require.Contains(t, r.body, `"code": "too_large"`)
}

// Config.CheckStream and CheckCache refuse what cannot be served with 400
// and the reason, before anything is stored.
func TestCheckHooksRefuseUnservable(t *testing.T) {
	boot, err := NewBootstrapAuthorizer(testToken)
	require.NoError(t, err)
	noDisk := errors.New("no broker has a data directory (FELIX_DATA_DIR)")
	srv, err := New(Config{Authorizer: boot,
		CheckStream: func(s api.Stream) error {
			if s.Durable {
				return noDisk
			}
			return nil
		},
		CheckCache: func(c api.Cache) error {
			if c.Durable {
				return noDisk
			}
			return nil
		}})
	require.NoError(t, err)
	in := &instance{srv: srv, url: newHTTPServer(t, srv)}
	t.Cleanup(func() { srv.Close() })
	in.seed(t)
	r := in.mustDo(t, http.StatusBadRequest, http.MethodPost, streamsURL, `{"stream":"orders","durable":true,"fsync":"on_commit"}`)
	require.Contains(t, r.body, "no broker has a data directory (FELIX_DATA_DIR)")
	in.mustDo(t, http.StatusBadRequest, http.MethodPost, "/v1/tenants/t1/namespaces/ns/caches", `{"cache":"c","durable":true}`)
	in.mustDo(t, http.StatusNotFound, http.MethodGet, streamsURL+"/orders", "")
	in.mustDo(t, http.StatusCreated, http.MethodPost, streamsURL, `{"stream":"orders"}`)
}
