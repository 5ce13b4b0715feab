package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devtls"
)

// caArgs gives parseFlags a CA file to read, so TLS is never the error.
func caArgs(t *testing.T, extra ...string) []string {
	t.Helper()
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "cert.pem")
	require.NoError(t, os.WriteFile(f, cert.PEM, 0o644))
	return append([]string{"--ca", f}, extra...)
}

func TestFlagValidationErrorsArePrecise(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "fast"}, `--profile "fast": want latency or throughput`},
		{[]string{"--ack", "some"}, `--ack "some": want none, each or batch`},
		{[]string{"--batch", "8"}, "--ack each acks every message, so --batch must be 1 (got 8); use --ack batch for one ack per batch"},
		{[]string{"--profile", "throughput", "--inflight", "4"}, "--inflight applies to acked publishes (--ack each or batch), not --ack none"},
		{[]string{"--duration", "5s", "--count", "10"}, "pass --duration or --count, not both"},
		{[]string{"--duration", "0"}, "--duration or --count must be positive"},
		{[]string{"--count", "-1"}, "--count must be positive"},
		{[]string{"--publishers", "0"}, "--publishers 0: want 1 to 65536"},
		{[]string{"--streams", "3", "--publishers", "2"}, "--streams 3 > --publishers 2 would leave streams without a publisher"},
		{[]string{"--shards", "2000"}, "--shards 2000: want 1 to 1024"},
		{[]string{"--slow", "2"}, "--slow 2: want 0 to --subscribers (1)"},
		{[]string{"--fsync", "on_commit"}, "--fsync on_commit applies to durable streams: add --durable"},
		{[]string{"--durable", "--fsync", "sometimes"}, `--fsync "sometimes": want on_commit, periodic or never`},
		{[]string{"--payload", "lots"}, `--payload "lots": want a size from 0 to 16MiB`},
		{[]string{"--payload", "32MiB"}, `--payload "32MiB": want a size from 0 to 16MiB`},
		{[]string{"--profile", "throughput", "--payload", "1MiB"}, "--payload 1048576 × --batch 64 does not fit the broker's 16MiB frame limit"},
		{[]string{"--stream-window", "1KiB"}, "--stream-window and --conn-window must be at least 64KiB"},
		{[]string{"--conn-window", "big"}, `--conn-window "big": want a size such as 65536, 64KiB or 16MiB`},
		{[]string{"--rate", "-5"}, "--rate must be 0 (unpaced) or a positive msg/s"},
		{[]string{"--repeat", "0"}, "--repeat 0: want at least 1"},
		{[]string{"--stream", "a/b"}, "--stream must not contain '/'"},
		{[]string{"extra"}, `unexpected argument "extra" (flags only)`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			_, err := parseFlags(caArgs(t, tc.args...), &bytes.Buffer{})
			require.EqualError(t, err, tc.want)
		})
	}
}

func TestTLSFlagErrors(t *testing.T) {
	_, err := parseFlags([]string{"--ca", filepath.Join(t.TempDir(), "missing.pem")}, &bytes.Buffer{})
	require.ErrorContains(t, err, "--ca: ")
	_, err = parseFlags(caArgs(t, "--fingerprint", "abcd"), &bytes.Buffer{})
	require.EqualError(t, err, "pass --ca or --fingerprint, not both")
	cfg, err := parseFlags([]string{"--fingerprint", "ab:CD" + string(bytes.Repeat([]byte("0"), 60))}, &bytes.Buffer{})
	require.NoError(t, err)
	require.NotNil(t, cfg.TLS)
}

func TestHelpIsNotAnError(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"--help"}, &out)
	require.True(t, errors.Is(err, flag.ErrHelp))
	require.Contains(t, out.String(), "no\ncoordinated omission")
	require.Contains(t, out.String(), "FELIX_EVENT_BATCH_MAX_EVENTS=1")
}

func TestProfilesSetDefaultsThatFlagsOverride(t *testing.T) {
	cfg, err := parseFlags(caArgs(t), &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, "latency", cfg.Profile)
	require.Equal(t, []any{1, 1, 1, 1, "each", 1}, []any{cfg.Publishers, cfg.Subscribers, cfg.Shards, cfg.Batch, cfg.Ack, cfg.Inflight})
	require.Equal(t, 10*time.Second, cfg.Duration)
	require.Equal(t, time.Second, cfg.Warmup)
	require.Equal(t, []string{"loadgen-1s-ephemeral"}, cfg.streamNames())
	require.Equal(t, "127.0.0.1:5000", cfg.Addr)
	require.Equal(t, "127.0.0.1:8080", cfg.Admin)
	require.EqualValues(t, 16<<20, cfg.StreamWindow)
	require.EqualValues(t, 64<<20, cfg.ConnWindow)

	cfg, err = parseFlags(caArgs(t, "--profile", "throughput", "--publishers", "8", "--payload", "4KiB",
		"--count", "1000", "--durable", "--streams", "2"), &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []any{8, 1, 4, 64, "none"}, []any{cfg.Publishers, cfg.Subscribers, cfg.Shards, cfg.Batch, cfg.Ack})
	require.Equal(t, 4096, cfg.Payload)
	require.Zero(t, cfg.Duration)
	require.EqualValues(t, 1000, cfg.Count)
	require.Equal(t, "periodic", cfg.Fsync)
	require.Equal(t, []string{"loadgen-4s-periodic-0", "loadgen-4s-periodic-1"}, cfg.streamNames())

	cfg, err = parseFlags(caArgs(t, "--subscribers", "0", "--stream", "demo", "--create=false"), &bytes.Buffer{})
	require.NoError(t, err)
	require.Zero(t, cfg.Subscribers)
	require.Equal(t, []string{"demo"}, cfg.streamNames())
}

// The matrix of the benchmark plan: each row is one command line.
func TestBenchmarkMatrixCommandLinesParse(t *testing.T) {
	for _, args := range [][]string{
		{"--profile", "latency", "--payload", "0", "--subscribers", "50"},
		{"--profile", "latency", "--payload", "4KiB", "--subscribers", "10"},
		{"--profile", "throughput", "--payload", "4KiB", "--publishers", "8"},
		{"--profile", "throughput", "--payload", "256", "--publishers", "2"},
		{"--profile", "latency", "--subscribers", "500", "--rate", "1000", "--inflight", "16"},
		{"--profile", "latency", "--subscribers", "50", "--slow", "10", "--slow-delay", "20ms", "--rate", "1000"},
		{"--profile", "throughput", "--ack", "batch", "--durable", "--fsync", "on_commit", "--publishers", "16"},
		{"--profile", "throughput", "--ack", "batch", "--publishers", "16"},
	} {
		_, err := parseFlags(caArgs(t, args...), &bytes.Buffer{})
		require.NoError(t, err, "%v", args)
	}
}
