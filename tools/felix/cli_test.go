package main

import (
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/internal/endpoint"
)

// --help and help print the usage on stdout and exit 0, at every level;
// version and --version print the build.
func TestHelpAndVersionExitZero(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"-h"}, {"help", "pub"}, {"pub", "--help"}, {"sub", "-h"}, {"cache", "--help"},
		{"cache", "put", "--help"}, {"counter", "add", "--help"}, {"watch", "--help"}, {"roster", "--help"},
		{"roster", "join", "--help"}, {"queue", "consume", "--help"}, {"queue", "--help"}, {"queue", "seek", "--help"}, {"admin", "--help"}, {"admin", "stream", "create", "--help"},
		{"context", "--help"}, {"token", "--help"}, {"token", "mint", "--help"}, {"cert", "--help"}, {"probe", "--help"},
		{"log", "--help"}, {"log", "dump", "--help"}, {"wire", "--help"}, {"completion", "--help"},
	} {
		code, out, errOut := runCLI(args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		require.Contains(t, out, "felix ", args)
		require.Contains(t, out, "usage:", args)
		require.Empty(t, errOut, args)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runCLI(args...)
		require.Equal(t, exitOK, code)
		require.True(t, strings.HasPrefix(out, "felix "), out)
	}
}

// A bad flag value is one line that says what is wanted (a duration's
// unit), never the usage twice.
func TestBadFlagValueSaysWhatIsWanted(t *testing.T) {
	code, out, errOut := runCLI("cache", "put", "k", "v", "--ttl", "5")
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Equal(t, "felix cache put: --ttl \"5\": want a duration with its unit, such as 5s, 250ms or 1m: 5s for seconds?\n"+
		"(felix cache put --help prints the usage)\n", errOut)
}

// felix completion bash and zsh list every subcommand, their verbs and
// flags; the bash script completes in a real bash.
func TestCompletionScripts(t *testing.T) {
	code, script, _ := runCLI("completion", "bash")
	require.Equal(t, exitOK, code)
	for _, want := range []string{"pub sub cache", "cache) verbs=\"put get del\"", "--ttl", "--json", "--key"} {
		require.Contains(t, script, want)
	}
	code, zsh, _ := runCLI("completion", "zsh")
	require.Equal(t, exitOK, code)
	require.Contains(t, zsh, "#compdef felix")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	out, err := exec.Command(bash, "--norc", "-c", script+"\nCOMP_WORDS=(felix roster jo); COMP_CWORD=2; _felix_complete; echo ${COMPREPLY[*]}").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "join", strings.TrimSpace(string(out)))
}

// felix sub follows every shard by default and prints the shard; publishes
// with --shard and --key land where asked, and acked ones print their
// shard and offset.
func TestSubEveryShardAndPubShardKey(t *testing.T) {
	two := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "orders"}, Shards: 2}
	tb := startBrokerWith(t, broker.Config{}, two)
	for _, args := range [][]string{
		{"--ack", "--shard", "0", "a"}, {"--ack", "--shard", "1", "b"}, {"--ack", "--idempotent=false", "--shard", "1", "c"},
		{"--shard", "0", "d"}, {"--key", "k1", "e"}, {"--ack", "--key", "k1", "f"},
	} {
		r := runPubT(t, "", tb.args(append([]string{"--stream", "orders"}, args...)...)...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
	}
	r := runPubT(t, "", tb.args("--stream", "orders", "--ack", "--shard", "1", "--json", "g")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	require.JSONEq(t, `{"shard":1,"offset":2,"count":1}`, lines[0])
	require.Contains(t, lines[1], `"messages":1`)

	r = runSubT(t, tb.args("--stream", "orders", "--from", "earliest", "--count", "7")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "following t1/default/orders shards 0-1 from earliest")
	got := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		got[l] = true
	}
	for _, want := range []string{"0 0 a", "1 0 b", "1 1 c", "0 1 d", "1 2 g"} {
		require.True(t, got[want], "%q in %q", want, r.stdout)
	}
	require.Len(t, got, 7)
	// One key, one shard: e and f together, in order.
	require.Regexp(t, `(?s)(0|1) \d+ e\n.*`, r.stdout)

	r = runSubT(t, tb.args("--stream", "orders", "--from", "3")...)
	require.Equal(t, exitUsage, r.code, "an OFFSET needs --shard on a stream of two")
}

// --json prints one JSON object per line: sub's events, cache get's value.
func TestJSONOutput(t *testing.T) {
	tb := startBroker(t)
	requireSummary(t, runPubT(t, "", tb.args("--ack", "--count", "2", "hi")...), "2", "4")
	r := runSubT(t, tb.args("--from", "earliest", "--count", "2", "--json")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	for i, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &ev))
		require.Equal(t, map[string]any{"shard": 0.0, "offset": float64(i), "payload": "hi"}, ev)
	}
	r = runT(t, append([]string{"cache", "put"}, tb.args("k", "v")...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runT(t, append([]string{"cache", "get"}, tb.args("k", "--json")...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.JSONEq(t, `{"key":"k","value":"v"}`, r.stdout)
	r = runT(t, append([]string{"cache", "get"}, tb.args("nope", "--json")...)...)
	require.Equal(t, exitFail, r.code)
	require.JSONEq(t, `{"key":"nope","found":false}`, r.stdout)
	r = runT(t, append([]string{"counter", "add"}, tb.args("n", "-3", "--json")...)...)
	require.JSONEq(t, `{"key":"n","value":-3}`, r.stdout)
}

// A port nothing listens on is "connection refused" at once, not a
// timeout.
func TestConnectionRefusedIsPrompt(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := pc.LocalAddr().String()
	pc.Close()
	tb := startBroker(t)
	r := runPubT(t, "", "--addr", addr, "--ca", tb.caFile, "--timeout", "30s", "x")
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "connection refused: no broker listens on "+addr)
}

// One way to point every command at a broker: FELIX_ADDR, else a saved
// context in use, else the dev directory (here: nothing, the default);
// felix context show says which and why.
func TestContextAndEnvironmentPickTheBroker(t *testing.T) {
	tb := startBroker(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	code, _, errOut := runCLI("context", "save", "local", "--addr", tb.addr, "--ca", tb.caFile, "--use")
	require.Equal(t, exitOK, code, errOut)
	code, out, _ := runCLI("context", "list")
	require.Equal(t, exitOK, code)
	require.Equal(t, "* local\n", out)
	code, out, _ = runCLI("context", "show")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "context       local")
	require.Regexp(t, `addr +`+tb.addr+` +\(context local\)`, out)

	requireSummary(t, runPubT(t, "", "--ack", "via-context"), "1", "11")

	code, _, _ = runCLI("context", "use", "--none")
	require.Equal(t, exitOK, code)
	t.Setenv(endpoint.AddrEnv, tb.addr)
	t.Setenv(endpoint.CAEnv, tb.caFile)
	requireSummary(t, runPubT(t, "", "--ack", "via-env"), "1", "7")
	r := runSubT(t, "--from", "earliest", "--count", "2")
	require.Equal(t, "0 0 via-context\n0 1 via-env\n", r.stdout)

	t.Setenv(endpoint.ContextEnv, "gone")
	r = runPubT(t, "", "x")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `context "gone" (FELIX_CONTEXT)`)
}
