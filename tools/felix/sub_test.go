package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubUnknownStreamFails(t *testing.T) {
	tb := startBroker(t)
	r := runSubT(t, tb.args("--stream", "nope", "--count", "1")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "felix sub: broker: stream not found: tenant=t1 namespace=default stream=nope")
}

func TestSubCursorInFutureFails(t *testing.T) {
	tb := startBroker(t)
	r := runSubT(t, tb.args("--from", "99", "--count", "1")...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "subscribe cursor in_future: requested 99, available 0")
}

// Without --count, sub runs until its context ends (SIGINT/SIGTERM in
// runSub) and that is a clean exit.
func TestSubUntilInterruptedExitsZero(t *testing.T) {
	tb := startBroker(t)
	requireSummary(t, runPubT(t, "", tb.args("--ack", "hi")...), "1", "2")
	ctx, cancel := context.WithCancel(ctxT(t))
	var out, errOut bytes.Buffer
	code := sub(ctx, tb.args("--from", "earliest"), cancelOnWrite{&out, cancel}, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	require.Equal(t, "0 hi\n", out.String())
}

func TestSubUsage(t *testing.T) {
	for _, args := range [][]string{
		{"sub", "extra"},
		{"sub", "--from", "yesterday"},
		{"sub", "--count", "-1"},
		{"sub", "--shard", "4294967296"},
	} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "usage: felix sub", args)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"hello":       "hello",
		"héllo wörld": "héllo wörld",
		"":            "",
		"a\nb":        "0x610a62",
		"tab\t":       "0x74616209",
		"\xff\xfe":    "0xfffe",
		"\x00":        "0x00",
	} {
		require.Equal(t, want, printable([]byte(in)), "%q", in)
	}
}
