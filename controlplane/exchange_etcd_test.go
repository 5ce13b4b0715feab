package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane/api"
)

// Two control planes on one etcd mint with the same tenant keys: a token
// exchanged at B verifies with the JWKS served by A, and a rotation at B
// shows in A's JWKS at once (each use rereads the stored keys' revision).
func TestEtcdExchangeSharedKeys(t *testing.T) {
	idp := newTestIdP(t)
	prefix := etcdPrefix()
	a := newAuthPlane(t, etcdStore(t, prefix))
	b := newAuthPlane(t, etcdStore(t, prefix))
	// The feed is read from this test's first revision on: the etcd server
	// is shared by the package's tests, and its history before may already
	// be compacted (cursor 0 then answers 410 resync).
	var before api.Snapshot
	require.NoError(t, json.Unmarshal([]byte(a.boot.mustDo(t, http.StatusOK, "GET", "/v1/snapshot", "").body), &before))
	a.boot.mustDo(t, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("t1", idp.URL))

	tok := b.mustExchange(t, "t1", idp.token(t, "root", []string{"Felix.Admin"}, nil))
	_, err := brokerVerifier(t, a.main.url).Verify(context.Background(), "t1", tok.Token)
	require.NoError(t, err)

	r := b.main.doToken(t, "POST", "/v1/tenants/t1/keys/rotate", "", tok.Token)
	require.Equal(t, http.StatusOK, r.status, r.body)
	var rot api.RotateResponse
	r.decode(t, &rot)
	var set struct{ Keys []struct{ Kid string } }
	require.NoError(t, json.Unmarshal([]byte(a.main.do(t, "GET", "/v1/tenants/t1/.well-known/jwks.json", "").body), &set))
	require.Len(t, set.Keys, 2)
	require.Equal(t, rot.KeyID, set.Keys[0].Kid)
	// The pre-rotation token still authorizes at A.
	r = a.main.doToken(t, "POST", "/v1/tenants/t1/namespaces", `{"namespace":"default"}`, tok.Token)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	// The keys never show in the etcd-backed feed or snapshot.
	for _, path := range []string{fmt.Sprintf("/v1/changes?cursor=%d", before.Revision), "/v1/snapshot"} {
		require.NotContains(t, a.boot.mustDo(t, http.StatusOK, "GET", path, "").body, "Private")
	}
}

// BenchmarkExchange is one POST /v1/token/exchange over real HTTP with the
// IdP's JWKS warm: RS256 verification, policy, Ed25519 minting, JSON. It
// reports p50 and p99 of the request latency.
func BenchmarkExchange(b *testing.B) {
	idp := newTestIdP(b)
	p := newAuthPlane(b, nil)
	p.boot.mustDo(b, http.StatusCreated, "POST", "/v1/tenants", idp.tenantBody("t1", idp.URL))
	body, _ := json.Marshal(map[string]any{"tenant": "t1", "idp_token": idp.token(b, "alice", []string{"Felix.Writer"}, nil)})
	p.mustExchange(b, "t1", idp.token(b, "alice", []string{"Felix.Writer"}, nil)) // warm the JWKS
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r := p.main.doToken(b, http.MethodPost, "/v1/token/exchange", string(body), "")
		lat = append(lat, time.Since(start))
		if r.status != http.StatusOK {
			b.Fatal(r.body)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
