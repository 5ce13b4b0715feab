package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/testutil"
)

// TestMain keeps a local broker's dev directory and the tools' variables
// out of the tests.
func TestMain(m *testing.M) { os.Exit(testutil.RunWithDevDir(m)) }

func TestFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, err := parseFlags(nil, &stderr)
	require.NoError(t, err)
	require.Equal(t, Config{Admin: "127.0.0.1:8080", Interval: time.Second, Top: 8}, cfg)
	require.Zero(t, cfg.samples(), "no --duration: until Ctrl-C")

	cfg, err = parseFlags([]string{"--admin", "10.0.0.1:9000", "--interval", "300ms", "--duration", "1s", "--bpf", "--json", "f", "--top", "3"}, &stderr)
	require.NoError(t, err)
	require.Equal(t, Config{Admin: "10.0.0.1:9000", Interval: 300 * time.Millisecond, Duration: time.Second, BPF: true, JSONFile: "f", Top: 3}, cfg)
	require.Equal(t, 4, cfg.samples(), "rounded up")

	for _, bad := range [][]string{{"--interval", "1ms"}, {"--duration", "-1s"}, {"--top", "0"}, {"--admin", ""}, {"extra"}} {
		_, err := parseFlags(bad, &stderr)
		require.Error(t, err, "%v", bad)
	}
}

func TestHelpSaysWhereTheProbesRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, cliMain(context.Background(), []string{"--help"}, &stdout, &stderr))
	for _, s := range []string{"same host", "root", "/debug/felix/stats", "JSON", "--admin", "--bpf"} {
		require.Contains(t, stdout.String(), s)
	}
	require.Empty(t, stderr.String())
	require.Equal(t, exitUsage, cliMain(context.Background(), []string{"--interval", "0"}, &stdout, &stderr))
	stdout.Reset()
	require.Equal(t, exitOK, cliMain(context.Background(), []string{"--version"}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "felixtrace ")
}
