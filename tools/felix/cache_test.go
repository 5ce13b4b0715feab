package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/testutil"
)

func runT(t *testing.T, args ...string) result {
	t.Helper()
	code, out, errOut := runCLI(args...)
	return result{code, out, errOut}
}

func TestCacheCLI(t *testing.T) {
	tb := startBroker(t)
	r := runT(t, append([]string{"cache", "put"}, tb.args("--cache", "demo", "greeting", "hello world")...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runT(t, append([]string{"cache", "get"}, tb.args("--cache", "demo", "greeting")...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "hello world\n", r.stdout)

	r = runT(t, append([]string{"cache", "del"}, tb.args("greeting")...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "deleted\n", r.stdout)
	r = runT(t, append([]string{"cache", "get"}, tb.args("greeting")...)...)
	require.Equal(t, exitFail, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, `felix cache get: key "greeting": not found`)

	// Flags after the arguments, as in the documented `--ttl 5s` form.
	r = runT(t, append(append([]string{"cache", "put"}, tb.args()...), "short", "x", "--ttl", "100ms")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Eventually(t, func() bool {
		return runT(t, append([]string{"cache", "get"}, tb.args("short")...)...).code == exitFail
	}, 5*time.Second, 20*time.Millisecond)

	r = runT(t, append([]string{"cache", "get"}, tb.args("--cache", "nope", "k")...)...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "cache_not_found: cache not found: t1/default/nope")
}

func TestCounterCLI(t *testing.T) {
	tb := startBroker(t)
	for _, tc := range []struct{ delta, want string }{{"5", "5\n"}, {"-7", "-2\n"}} {
		r := runT(t, append([]string{"counter", "add"}, tb.args("--cache", "demo", "hits", tc.delta)...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, tc.want, r.stdout)
	}
	r := runT(t, append([]string{"counter", "get"}, tb.args("hits")...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "-2\n", r.stdout)
}

func TestWatchCLI(t *testing.T) {
	tb := startBroker(t)
	require.Equal(t, exitOK, runT(t, append([]string{"cache", "put"}, tb.args("k", "v0")...)...).code)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut testutil.LockedBuffer
	done := make(chan int, 1)
	go func() { done <- watch(ctx, tb.args("--current", "--count", "4", "k"), &out, &errOut) }()
	// The watch registers before it prints its first (current) line;
	// changes made after that line are all delivered.
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "put v0") }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, exitOK, runT(t, append([]string{"cache", "put"}, tb.args("k", "v1")...)...).code)
	require.Equal(t, exitOK, runT(t, append([]string{"counter", "add"}, tb.args("k2", "1")...)...).code)
	require.Equal(t, exitOK, runT(t, append([]string{"cache", "del"}, tb.args("k")...)...).code)
	require.Equal(t, exitOK, runT(t, append([]string{"cache", "put"}, tb.args("k", "v2")...)...).code)
	require.Equal(t, exitOK, <-done, errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	for i, want := range []string{" put v0", " put v1", " delete", " put v2"} {
		require.True(t, strings.HasSuffix(lines[i], want), "%q", lines[i])
	}
}

func TestCacheCLIUsage(t *testing.T) {
	for _, args := range [][]string{
		{"cache"},
		{"cache", "frob", "k"},
		{"cache", "put", "k"},
		{"cache", "get", "a", "b"},
		{"cache", "put", "k", "v", "--ttl", "-1s"},
		{"counter", "add", "k", "x"},
		{"counter", "add", "k"},
	} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "felix c", args)
	}
	code, _, stderr := runCLI("watch")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "(felix watch --help prints the usage)")
}

// felix cache put --if-absent / --if-version N: applied prints the version
// written; a condition that does not hold prints the key's current version
// and exits 1; cache get --version prints the version before the value.
func TestCacheConditionalPutCLI(t *testing.T) {
	tb := startBroker(t)
	put := func(extra ...string) result {
		return runT(t, append([]string{"cache", "put"}, tb.args(extra...)...)...)
	}
	r := put("lease", "a", "--if-absent")
	require.Equal(t, exitOK, r.code, r.stderr)
	fields := strings.Fields(r.stdout)
	require.Len(t, fields, 2)
	require.Equal(t, "applied", fields[0])
	v1 := fields[1]

	r = put("lease", "b", "--if-absent")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "refused "+v1+"\n", r.stdout)
	r = runT(t, append([]string{"cache", "get"}, tb.args("lease", "--version")...)...)
	require.Equal(t, v1+" a\n", r.stdout, r.stderr)

	r = put("lease", "c", "--if-version", v1)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "applied "))
	r = put("lease", "d", "--if-version", v1)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stdout, "refused ")
	r = put("other", "d", "--if-version", v1)
	require.Equal(t, "refused absent\n", r.stdout)

	r = put("lease", "e", "--if-version", "x")
	require.Equal(t, exitUsage, r.code)
	r = put("lease", "e", "--if-version", "1", "--if-absent")
	require.Equal(t, exitUsage, r.code)
}
