package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/cmd/internal/command"
	"github.com/felixmq/felix/internal/testutil"
)

// TestAdminAPIRefusesAnonymousBeyondLoopback is the admin API attack: a
// broker following a control plane served POST /v1/streams, /v1/caches and
// /debug/pprof/ to anyone on 0.0.0.0. Beyond loopback it now refuses to
// start without a credential and FELIX_ADMIN_REMOTE; with them, anonymous
// requests (and wrong or insufficient tokens) are refused before their
// body is read and nothing is created, while /live, /ready and a bearer of
// the admin token or of a tenant-wide admin Felix token of
// FELIX_ADMIN_TENANT are served.
func TestAdminAPIRefusesAnonymousBeyondLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker processes against a control plane")
	}
	minter, err := auth.NewMinter(auth.MinterConfig{})
	require.NoError(t, err)
	url, cpToken, _ := jwksControlPlane(t, minter, "default", "t1", "t2")
	follow := []string{"FELIX_CONTROLPLANE_URL=" + url, "FELIX_CONTROLPLANE_TOKEN_FILE=" + cpToken, "FELIX_STREAMS="}
	_, port, err := net.SplitHostPort(freeAddr(t, "tcp"))
	require.NoError(t, err)
	anyAddr := "FELIX_ADMIN_BIND=0.0.0.0:" + port

	out, err := brokerCmd(t, append(follow, anyAddr)).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the broker started with an unauthenticated admin API on 0.0.0.0: %s", out)
	require.Equal(t, command.ExitConfig, ee.ExitCode())
	require.Contains(t, string(out), "FELIX_ADMIN_BIND 0.0.0.0:"+port+" is not loopback")

	secret := filepath.Join(t.TempDir(), "admin-token")
	require.NoError(t, os.WriteFile(secret, []byte("admin-secret-0123456789\n"), 0o600))
	bp := startBrokerProcess(t, append(follow, anyAddr, "FELIX_ADMIN_REMOTE=true", "FELIX_ADMIN_TOKEN_FILE="+secret,
		"FELIX_ADMIN_TENANT=t1")...)
	base := "http://127.0.0.1:" + port
	t1Admin, _, err := minter.Mint("t1", "ops", []auth.Permission{{Action: auth.ActionAdmin, Resource: "t1/*/*"}})
	require.NoError(t, err)
	t1Writer, _, err := minter.Mint("t1", "app", []auth.Permission{{Action: auth.ActionPublish, Resource: "t1/*/*"}})
	require.NoError(t, err)
	t2Admin, _, err := minter.Mint("t2", "ops", []auth.Permission{{Action: auth.ActionAdmin, Resource: "t2/*/*"}})
	require.NoError(t, err)
	stream := `{"tenant":"t1","namespace":"default","stream":"s%d","shards":8}`
	for i, c := range []struct {
		method, path, bearer string
		want                 int
	}{
		{http.MethodPost, "/v1/streams", "", http.StatusUnauthorized},
		{http.MethodPost, "/v1/caches", "", http.StatusUnauthorized},
		{http.MethodGet, "/debug/pprof/", "", http.StatusUnauthorized},
		{http.MethodGet, "/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{http.MethodGet, "/metrics", "", http.StatusUnauthorized},
		{http.MethodGet, "/debug/felix/stats", "wrong", http.StatusUnauthorized},
		{http.MethodPost, "/v1/streams", t2Admin, http.StatusUnauthorized},
		{http.MethodPost, "/v1/streams", t1Writer, http.StatusForbidden},
		{http.MethodGet, "/live", "", http.StatusOK},
		{http.MethodGet, "/ready", "", http.StatusOK},
		{http.MethodGet, "/debug/pprof/cmdline", "admin-secret-0123456789", http.StatusOK},
		// Through authentication, a broker following a control plane
		// points at it: streams are created there.
		{http.MethodPost, "/v1/streams", t1Admin, http.StatusConflict},
	} {
		code, body := testutil.Call(t, c.method, base+c.path, fmt.Sprintf(stream, i), c.bearer)
		require.Equal(t, c.want, code, "%s %s: %s", c.method, c.path, body)
		if code == http.StatusConflict {
			require.Contains(t, body, "belong to the control plane at "+url)
		}
	}
	code, body := testutil.Call(t, http.MethodGet, base+"/v1/streams", "", "admin-secret-0123456789")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `"s0"`, "no refused request created anything")
	require.Eventually(t, func() bool { return containsAll(bp.log.text(), "admin request refused") }, 5*time.Second, 10*time.Millisecond)
}

// TestDevDirOfAnotherUserIsRefused: a FELIX_DEV_DIR another local user
// pre-created let that user swap controlplane.url and collect the
// operator's bearer token. The broker now exits 2 instead of writing into
// it, and writes nothing there.
func TestDevDirOfAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "felix-dev")
	require.NoError(t, os.Mkdir(dir, 0o777))
	require.NoError(t, os.Chown(dir, 65534, 65534))
	out, err := brokerCmd(t, []string{"FELIX_DEV_DIR=" + dir, "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0",
		"FELIX_QUIC_BIND=" + freeAddr(t, "udp"), "FELIX_ADMIN_BIND=" + freeAddr(t, "tcp")}).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the broker started: %s", out)
	require.Equal(t, command.ExitConfig, ee.ExitCode())
	require.Contains(t, string(out), "is owned by user id 65534")
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "nothing written there")
}
