package main

import (
	"bufio"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cmd/internal/command"
	"github.com/felixmq/felix/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the README knob table")

// The test binary doubles as the control-plane binary so that process-level
// tests (exit status, signals) run the real main.
func TestMain(m *testing.M) {
	if os.Getenv("CP_TEST_EXEC") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func cpCmd(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "CP_TEST_EXEC=1"), env...)
	return cmd
}

func TestREADMEKnobTable(t *testing.T) {
	require.NoError(t, command.READMETable("../../README.md", "<!-- cp-knobs:begin -->\n", "<!-- cp-knobs:end -->", registry.Markdown(), *update))
}

func TestEnvListsEveryKnob(t *testing.T) {
	var b strings.Builder
	require.Equal(t, command.ExitOK, run([]string{"env"}, &b, io.Discard))
	for _, k := range registry.Knobs() {
		require.Contains(t, b.String(), k.Name)
	}
	require.Equal(t, command.ExitConfig, run([]string{"frobnicate"}, io.Discard, io.Discard))
}

func exitsWith(t *testing.T, status int, want string, env ...string) {
	t.Helper()
	out, err := cpCmd(env...).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "output: %s", out)
	require.Equal(t, status, ee.ExitCode(), "output: %s", out)
	require.Contains(t, string(out), want)
}

func TestConfigurationErrors(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"FELIX_CP_STORE=zookeeper"}, `FELIX_CP_STORE="zookeeper": unknown word (allowed: one of memory|etcd)`},
		{[]string{"FELIX_CP_HISTORY=0"}, `FELIX_CP_HISTORY="0": out of range`},
		{[]string{"FELIX_CP_BIND=7070"}, `FELIX_CP_BIND="7070": not host:port`},
		{[]string{"FELIX_CP_BIND=0.0.0.0:0"}, "FELIX_CP_BIND=0.0.0.0:0 is not a loopback address and FELIX_CP_BOOTSTRAP_TOKEN_FILE is not set"},
		{[]string{"FELIX_CP_BIND=:0"}, "is not a loopback address"},
		{[]string{"FELIX_CP_STORE=etcd"}, "FELIX_CP_STORE=etcd needs FELIX_CP_ETCD_ENDPOINTS"},
		{[]string{"FELIX_CP_BOOTSTRAP_TOKEN_FILE=" + short}, "bootstrap token is 3 bytes; at least 16 are required"},
		{[]string{"FELIX_CP_BOOTSTRAP_TOKEN_FILE=/nonexistent/token"}, "FELIX_CP_BOOTSTRAP_TOKEN_FILE: stat /nonexistent/token"},
	} {
		t.Run(tc.env[0], func(t *testing.T) { exitsWith(t, command.ExitConfig, tc.want, tc.env...) })
	}
}

// An unreachable etcd fails start-up (status 1) within the etcd timeout.
func TestUnreachableEtcdFailsStartup(t *testing.T) {
	exitsWith(t, command.ExitFailed, "store unavailable", "FELIX_CP_BIND=127.0.0.1:0",
		"FELIX_CP_STORE=etcd", "FELIX_CP_ETCD_ENDPOINTS=127.0.0.1:1", "FELIX_CP_ETCD_TIMEOUT_MS=300")
}

var readyLine = regexp.MustCompile(`felix-controlplane ready.* api=(\S+) .*bootstrap=(\S+)`)

// cpProcess is a felix-controlplane process started with a bootstrap
// token, and the URLs of its two listeners.
type cpProcess struct {
	cmd       *exec.Cmd
	api, boot string
}

// startCP starts a control plane with env (which must configure the
// bootstrap token) on free loopback ports and waits for its ready line.
func startCP(t *testing.T, env ...string) *cpProcess {
	cmd := cpCmd(append([]string{"FELIX_CP_BIND=127.0.0.1:0", "FELIX_CP_BOOTSTRAP_BIND=127.0.0.1:0"}, env...)...)
	m := startReady(t, cmd, readyLine)
	return &cpProcess{cmd: cmd, api: "http://" + m[1], boot: "http://" + m[2]}
}

// startReady starts cmd (killed at cleanup) and returns the submatches
// of the first line of its stderr that matches ready.
func startReady(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp) []string {
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var m []string
	for m == nil && sc.Scan() {
		m = ready.FindStringSubmatch(sc.Text())
	}
	require.NotNil(t, m, "%s: no line matching %q on stderr", cmd.Path, ready)
	go io.Copy(io.Discard, stderr)
	return m
}

// request sends a request with bearer and returns the status.
func request(t *testing.T, bearer, method, url, body string) int {
	code, _ := testutil.Call(t, method, url, body, bearer)
	return code
}

// Started with a bootstrap token: the bootstrap listener admits the token,
// the main listener refuses everything (no verifier yet), and SIGTERM ends
// a pending long-poll and exits 0 promptly.
const token = "a-bootstrap-token-of-32-bytes-ok"

// startWithBootstrap runs a control plane whose bootstrap token is token,
// with env, and returns it with the URLs of its main and bootstrap
// listeners.
func startWithBootstrap(t *testing.T, env ...string) (cmd *exec.Cmd, api, boot string) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	p := startCP(t, append([]string{"FELIX_CP_BOOTSTRAP_TOKEN_FILE=" + tokenFile}, env...)...)
	return p.cmd, p.api, p.boot
}

func TestBootstrapListenerAndSIGTERM(t *testing.T) {
	cmd, api, boot := startWithBootstrap(t)
	do := func(method, url, body string) int { return request(t, token, method, url, body) }
	require.Equal(t, http.StatusCreated, do("POST", boot+"/v1/tenants", `{"tenant":"t1"}`))
	require.Equal(t, http.StatusUnauthorized, do("GET", api+"/v1/tenants/t1/namespaces", ""), "the main listener admits Felix tokens only")
	require.Equal(t, http.StatusForbidden, do("GET", api+"/v1/tenants", ""), "listing tenants needs the operator tenant or the bootstrap listener")
	require.Equal(t, http.StatusOK, do("GET", api+"/v1/tenants/t1/.well-known/jwks.json", ""), "the tenant JWKS is public")
	require.Equal(t, http.StatusOK, do("GET", api+"/v1/system/health", ""))

	poll := make(chan int, 1)
	// Revision 1 is the tenant, 2 its signing keys (hidden from the feed):
	// a reader at 2 is up to date and waits.
	go func() { poll <- do("GET", boot+"/v1/changes?cursor=2&wait=30s", "") }()
	select {
	case s := <-poll:
		t.Fatalf("long-poll answered early with %d", s)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "exit 0 on SIGTERM")
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10s of SIGTERM")
	}
	require.Equal(t, http.StatusOK, <-poll, "the pending long-poll got an empty page")
}
