package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cmd/internal/command"
)

var update = flag.Bool("update", false, "rewrite the README knob table")

// The test binary doubles as the broker binary so that process-level tests
// (exit status, signals) run the real main without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("BROKER_TEST_EXEC") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// brokerCmd runs the test binary as felix-broker with env. The embedded
// control plane is off unless env turns it on (a later value wins): the
// process tests dial with the dev verifier's token, and a broker they
// kill and restart would come back with new tenant keys (its control
// plane's store is memory), refusing the tokens minted before.
func brokerCmd(t *testing.T, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(knobEnviron(), "BROKER_TEST_EXEC=1", "FELIX_EMBEDDED_CONTROLPLANE_BIND=off"), env...)
	return cmd
}

// knobEnviron is this process's environment without the FELIX_* variables
// that are not broker knobs (the tests' own, as FELIX_HOSTILE_SCALE): the
// broker refuses unknown knobs.
func knobEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "FELIX_") || registry.Lookup(name) != nil {
			out = append(out, kv)
		}
	}
	return out
}

func TestREADMEKnobTable(t *testing.T) {
	require.NoError(t, command.READMETable("../../README.md", "<!-- knobs:begin -->\n", "<!-- knobs:end -->", registry.Markdown(), *update))
}

func TestBadKnobExitsWithStatus2NamingKnob(t *testing.T) {
	for env, want := range map[string]string{
		"FELIX_MAX_FRAME_BYTES=abc":                     `FELIX_MAX_FRAME_BYTES="abc": not a size`,
		"FELIX_MAX_FRAME_BYTES=1":                       `FELIX_MAX_FRAME_BYTES="1": out of range (allowed: size in [1KiB, 1GiB]`,
		"FELIX_LOG_LEVEL=loud":                          `FELIX_LOG_LEVEL="loud": unknown word (allowed: one of debug|info|warn|error)`,
		"FELIX_QUIC_BIND=127.0.0.1":                     `FELIX_QUIC_BIND="127.0.0.1": not host:port`,
		"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=-1":            `FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS="-1": out of range`,
		"FELIX_EMBEDDED_CONTROLPLANE_BIND=0.0.0.0:7070": `FELIX_EMBEDDED_CONTROLPLANE_BIND="0.0.0.0:7070": not a loopback address`,
		"FELIX_NODE_ID=b/1":                             `FELIX_NODE_ID="b/1": character '/'`,
		"FELIX_ADVERTISE_ADDR=nohost":                   `FELIX_ADVERTISE_ADDR="nohost"`,
		"FELIX_ZONE=eu/west":                            `FELIX_ZONE="eu/west": zone "eu/west" has '/' at byte 2`,
		// Cluster mode without a control plane: nothing to register with.
		"FELIX_NODE_ID=b1": "FELIX_NODE_ID needs FELIX_CONTROLPLANE_URL",
		// A misspelled knob only warned, and the broker started.
		"FELIX_SUBSCRIBER_QUEU=5": "FELIX_SUBSCRIBER_QUEU: unknown knob (did you mean FELIX_SUBSCRIBER_QUEUE?)",
		// A bad name exited 1 with the embedded control plane's raw JSON.
		"FELIX_STREAMS=t1/default/bad name": `stream "bad name" has ' ' at byte 3`,
	} {
		t.Run(env, func(t *testing.T) {
			out, err := brokerCmd(t, []string{env}).CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "output: %s", out)
			require.Equal(t, command.ExitConfig, ee.ExitCode())
			require.Contains(t, string(out), want)
		})
	}
}

func TestEnvListsEveryKnob(t *testing.T) {
	var b strings.Builder
	require.Equal(t, command.ExitOK, run([]string{"env"}, &b, io.Discard))
	for _, k := range registry.Knobs() {
		require.Contains(t, b.String(), k.Name)
	}
}

func TestUnknownCommand(t *testing.T) {
	require.Equal(t, command.ExitConfig, run([]string{"frobnicate"}, io.Discard, io.Discard))
}

// freeAddr is a loopback address free at the moment, its port below the
// ephemeral range (32768 up): a broker killed and started again on it
// must find it free, and any socket bound to port 0 (every client's)
// could take an ephemeral one in between.
func freeAddr(t *testing.T, network string) string {
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		if network == "udp" {
			if c, err := net.ListenPacket("udp", addr); err == nil {
				c.Close()
				return addr
			}
			continue
		}
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return ""
}

// A broker started with defaults (its embedded control plane included)
// reports ready, serves /ready, and exits 0 on SIGTERM.
func TestStartReadyAndSIGTERM(t *testing.T) {
	admin := freeAddr(t, "tcp")
	cmd := brokerCmd(t, []string{"FELIX_QUIC_BIND=" + freeAddr(t, "udp"), "FELIX_ADMIN_BIND=" + admin,
		"FELIX_DEV_DIR=" + t.TempDir(), "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0"})
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	ready := regexp.MustCompile(`felix-broker ready`)
	for sc.Scan() && !ready.MatchString(sc.Text()) {
	}
	go io.Copy(io.Discard, stderr)

	resp, err := http.Get(fmt.Sprintf("http://%s/ready", admin))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "broker must exit 0 on SIGTERM")
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("broker did not exit within 10s of SIGTERM")
	}
}
