package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/etcdtest"
	"github.com/felixmq/felix/internal/testutil"
)

// TestEtcdTwoControlPlanesAndABroker is the etcd check on real
// processes: two felix-controlplane processes on one (embedded) etcd see
// each other's writes, and a felix-broker process following control plane
// B serves a stream created through control plane A within 1 s of the
// create returning (the broker's admin API lists what it serves; creating
// a stream there is synchronous).
func TestEtcdTwoControlPlanesAndABroker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds felix-broker and runs etcd, two control planes and a broker")
	}
	brokerBin := testutil.GoBuild(t, "github.com/felixmq/felix/cmd/felix-broker")
	dir := t.TempDir()

	began := time.Now() // the bound below leaves the build out
	etcd, err := etcdtest.Start()
	if err != nil {
		t.Skipf("embedded etcd could not start on loopback: %v", err)
	}
	t.Cleanup(etcd.Close)
	const token = "bootstrap-token-for-the-etcd-e2e-test"
	tokenFile := filepath.Join(dir, "bootstrap-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	env := []string{"FELIX_CP_STORE=etcd", "FELIX_CP_ETCD_ENDPOINTS=" + etcd.Endpoint, "FELIX_CP_BOOTSTRAP_TOKEN_FILE=" + tokenFile}
	a, b := startCP(t, env...), startCP(t, env...)

	// Each sees the other's writes.
	require.Equal(t, http.StatusCreated, request(t, token, "POST", a.boot+"/v1/tenants", `{"tenant":"t1"}`))
	require.Equal(t, http.StatusOK, request(t, token, "GET", b.boot+"/v1/tenants/t1", ""))
	require.Equal(t, http.StatusCreated, request(t, token, "POST", b.boot+"/v1/tenants/t1/namespaces", `{"tenant":"t1","namespace":"default"}`))
	require.Equal(t, http.StatusOK, request(t, token, "GET", a.boot+"/v1/tenants/t1/namespaces/default", ""))

	admin := startFollowingBroker(t, brokerBin, b.boot, tokenFile)
	require.Equal(t, http.StatusCreated, request(t, token, "POST", a.boot+"/v1/tenants/t1/namespaces/default/streams",
		`{"tenant":"t1","namespace":"default","stream":"orders","shards":2}`))
	created := time.Now()
	var learned time.Duration
	for learned == 0 && time.Since(created) < 5*time.Second {
		if brokerServes(t, admin, "orders") {
			learned = time.Since(created)
		} else {
			time.Sleep(5 * time.Millisecond) // polling the broker: it announces nothing
		}
	}
	require.NotZero(t, learned, "the broker did not serve the stream within 5 s")
	t.Logf("stream created through control plane A was served by the broker following B %v later", learned)
	require.Less(t, learned, time.Second)
	require.Less(t, time.Since(began), 30*time.Second, "the scenario's bound (etcd, two control planes, a broker)")
}

var brokerReady = regexp.MustCompile(`felix-broker ready.* admin=(\S+)`)

// startFollowingBroker runs the felix-broker binary following the control
// plane at cp and returns its admin address once it is ready (after its
// first snapshot).
func startFollowingBroker(t *testing.T, bin, cp, tokenFile string) string {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "FELIX_CONTROLPLANE_URL="+cp, "FELIX_CONTROLPLANE_TOKEN_FILE="+tokenFile,
		"FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_ADMIN_BIND=127.0.0.1:0", "FELIX_DEV_DIR="+t.TempDir(),
		"FELIX_STREAMS=", "FELIX_CACHES=", "FELIX_ALLOW_UNKNOWN_KNOBS=true") // this test's environment is not all broker knobs
	return startReady(t, cmd, brokerReady)[1]
}

// brokerServes reports whether the broker's admin API lists stream.
func brokerServes(t *testing.T, admin, stream string) bool {
	resp, err := http.Get("http://" + admin + "/v1/streams")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct{ Streams []struct{ Stream string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	return slices.ContainsFunc(list.Streams, func(s struct{ Stream string }) bool { return s.Stream == stream })
}
