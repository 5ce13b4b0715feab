package controlplane

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/etcdtest"
)

const testToken = "bootstrap-token-for-tests-0123456789"

// TestMain stops the shared embedded etcd.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedEtcd.server != nil {
		sharedEtcd.server.Close()
	}
	os.Exit(code)
}

// sharedEtcd is one embedded etcd for the whole package: starting one
// takes about a second, and tests stay apart by key prefix.
var sharedEtcd struct {
	once     sync.Once
	server   *etcdtest.Server
	err      error
	prefixes atomic.Int64
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// etcdClient returns a new client of the shared embedded etcd, starting it
// on first use; the test is skipped only if the server cannot start.
func etcdClient(t testing.TB) *clientv3.Client {
	sharedEtcd.once.Do(func() { sharedEtcd.server, sharedEtcd.err = etcdtest.Start() })
	if sharedEtcd.err != nil {
		t.Skipf("embedded etcd server could not start on loopback: %v", sharedEtcd.err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{sharedEtcd.server.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// etcdPrefix returns a key prefix no other test uses.
func etcdPrefix() string { return fmt.Sprintf("/felix-test/%d/", sharedEtcd.prefixes.Add(1)) }

// backend makes the store of one control-plane instance; instances made by
// one backend value within a test share their data.
type backend struct {
	name string
	// open returns a function that opens another instance on the same data.
	open func(t testing.TB) func(t testing.TB) Store
}

var backends = []backend{
	{"memory", func(t testing.TB) func(testing.TB) Store {
		ms, err := NewMemoryStore(MemoryConfig{})
		require.NoError(t, err)
		t.Cleanup(func() { ms.Close() })
		return func(testing.TB) Store { return ms }
	}},
	{"etcd", func(t testing.TB) func(testing.TB) Store {
		etcdClient(t) // skip early if etcd cannot start
		prefix := etcdPrefix()
		return func(t testing.TB) Store {
			es, err := NewEtcdStore(EtcdConfig{Client: etcdClient(t), Prefix: prefix})
			require.NoError(t, err)
			t.Cleanup(func() { es.Close() })
			return es
		}
	}},
}

// forEachBackend runs f once per store backend.
func forEachBackend(t *testing.T, f func(t *testing.T, open func(testing.TB) Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.open(t)) })
	}
}

// instance is one control plane served over real HTTP.
type instance struct {
	srv *Server
	url string
}

func newInstance(t testing.TB, st Store, auth Authorizer) *instance {
	srv, err := New(Config{Store: st, Authorizer: auth})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); hs.Close() })
	return &instance{srv: srv, url: hs.URL}
}

func newBootstrapInstance(t testing.TB, st Store) *instance {
	auth, err := NewBootstrapAuthorizer(testToken)
	require.NoError(t, err)
	return newInstance(t, st, auth)
}

// reply is an HTTP answer.
type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) decode(t testing.TB, v any) {
	require.NoError(t, json.Unmarshal([]byte(r.body), v), "body: %s", r.body)
}

func (in *instance) do(t testing.TB, method, path, body string) reply {
	return in.doToken(t, method, path, body, testToken)
}

func (in *instance) doToken(t testing.TB, method, path, body, token string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, in.url+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

// mustDo performs a request that must answer want.
func (in *instance) mustDo(t testing.TB, want int, method, path, body string) reply {
	t.Helper()
	r := in.do(t, method, path, body)
	require.Equal(t, want, r.status, "%s %s: %s", method, path, r.body)
	return r
}

func (in *instance) changes(t testing.TB, query string) api.ChangesPage {
	var p api.ChangesPage
	in.mustDo(t, http.StatusOK, http.MethodGet, "/v1/changes?"+query, "").decode(t, &p)
	return p
}

// seed creates tenant t1 and namespace t1/ns.
func (in *instance) seed(t testing.TB) {
	in.mustDo(t, http.StatusCreated, http.MethodPost, "/v1/tenants", `{"tenant":"t1"}`)
	in.mustDo(t, http.StatusCreated, http.MethodPost, "/v1/tenants/t1/namespaces", `{"namespace":"ns"}`)
}

const streamsURL = "/v1/tenants/t1/namespaces/ns/streams"

func newHTTPServer(t testing.TB, h http.Handler) string {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// rawPost posts with the test token from any goroutine (require may not be
// used off the test goroutine).
func rawPost(url, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	return http.DefaultClient.Do(req)
}

func stringsBody(s string) io.Reader { return strings.NewReader(s) }

func readAll(t testing.TB, resp *http.Response) string {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// samplePath fills a route pattern's wildcards with valid names.
func samplePath(pattern string) string {
	r := strings.NewReplacer("{tenant}", "t1", "{namespace}", "ns", "{stream}", "s", "{cache}", "c")
	return r.Replace(pattern)
}

// follow takes a snapshot and reads the feed from its revision, as a broker
// starts, and returns the cursor to continue from. (Cursor 0 would resync
// once a test has compacted the shared etcd.)
func (in *instance) follow(t testing.TB) int64 {
	var snap api.Snapshot
	in.mustDo(t, http.StatusOK, "GET", "/v1/snapshot", "").decode(t, &snap)
	for cursor := snap.Revision; ; {
		p := in.changes(t, fmt.Sprintf("cursor=%d&limit=1000", cursor))
		if cursor = p.NextCursor; !p.Truncated {
			return cursor
		}
	}
}
