package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

var summary = regexp.MustCompile(`^published (\d+) messages? \((\d+) bytes\) in \S+\n$`)

func requireSummary(t *testing.T, r result, messages, bytes string) {
	t.Helper()
	require.Equal(t, exitOK, r.code, r.stderr)
	m := summary.FindStringSubmatch(r.stderr)
	require.NotNil(t, m, r.stderr)
	require.Equal(t, []string{messages, bytes}, m[1:])
}

func TestPubThenSubFromEarliest(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"acked (idempotent)", []string{"--ack"}},
		{"acked batches (idempotent)", []string{"--ack", "--batch", "2"}},
		{"acked, not idempotent", []string{"--ack", "--idempotent=false"}},
		{"fire and forget", nil},
		{"fire and forget batches", []string{"--batch", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := startBroker(t)
			requireSummary(t, runPubT(t, "one\ntwo\n", tb.args(tc.args...)...), "2", "6")
			requireSummary(t, runPubT(t, "", tb.args(append(tc.args, "--count", "2", "hello")...)...), "2", "10")
			r := runSubT(t, tb.args("--from", "earliest", "--count", "3")...)
			require.Equal(t, exitOK, r.code, r.stderr)
			require.Equal(t, "0 0 one\n0 1 two\n0 2 hello\n", r.stdout)
		})
	}
}

func TestPubSizeAndFingerprint(t *testing.T) {
	tb := startBroker(t)
	pin := []string{"--addr", tb.addr, "--fingerprint", tb.fingerprint}
	requireSummary(t, runPubT(t, "", append(pin, "--ack", "--size", "4", "--count", "2")...), "2", "8")
	r := runSubT(t, append(pin, "--from", "1", "--count", "1")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0 1 xxxx\n", r.stdout)

	wrong := []string{"--addr", tb.addr, "--fingerprint", "00" + tb.fingerprint[2:], "--timeout", "2s"}
	r = runPubT(t, "", append(wrong, "x")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "does not match pinned fingerprint")
}

func TestPubAckedUnknownStreamFails(t *testing.T) {
	tb := startBroker(t)
	r := runPubT(t, "", tb.args("--stream", "nope", "--ack", "x")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "stream not found: tenant=t1 namespace=default stream=nope")
	require.NotContains(t, r.stderr, "published")
}

func TestPubFireAndForgetUnknownStreamFails(t *testing.T) {
	tb := startBroker(t)
	r := runPubT(t, "", tb.args("--stream", "nope", "x")...)
	require.Equal(t, exitFail, r.code, r.stderr)
	require.Contains(t, r.stderr, "stream not found: tenant=t1 namespace=default stream=nope")
}

func TestPubUsage(t *testing.T) {
	for _, args := range [][]string{
		{"pub", "a", "b"},
		{"pub", "--size", "3", "msg"},
		{"pub", "--count", "3"},
		{"pub", "--count", "0", "msg"},
		{"pub", "--batch", "0", "msg"},
		{"pub", "--ca", "x.pem", "--fingerprint", "ab", "msg"},
		{"pub", "--fingerprint", "abc", "msg"},
		{"pub", "--key", "k", "--shard", "1", "msg"},
		{"pub", "--shard", "-2", "msg"},
	} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "(felix pub --help prints the usage)", args)
	}
}
