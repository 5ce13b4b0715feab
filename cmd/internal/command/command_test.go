package command_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cmd/internal/command"
	"github.com/felixmq/felix/internal/knob"
)

var errConfig = errors.New("configuration")

func spec(serve func(context.Context, *knob.Values, *slog.Logger) error) (command.Spec, knob.Int) {
	r := knob.New()
	n := r.Int("FELIX_TEST_N", 3, 1, 9, "a number")
	return command.Spec{
		Name: "felix-test", What: "test server", Registry: r,
		LogLevel:     r.Enum("FELIX_LOG_LEVEL", "info", []string{"debug", "info", "warn", "error"}, "level"),
		LogFormat:    r.Enum("FELIX_LOG_FORMAT", "text", []string{"text", "json"}, "format"),
		AllowUnknown: r.Bool("FELIX_ALLOW_UNKNOWN_KNOBS", false, "allow unknown"),
		Foreign:      func(name string) bool { return name == "FELIX_OTHER_PROGRAM" },
		Serve:        serve, ErrConfig: errConfig,
	}, n
}

func TestRunServesWithValidatedKnobs(t *testing.T) {
	t.Setenv("FELIX_TEST_N", "7")
	t.Setenv("FELIX_OTHER_PROGRAM", "1") // Foreign: neither refused nor warned about
	var (
		got int64
		n   knob.Int
		s   command.Spec
	)
	s, n = spec(func(_ context.Context, v *knob.Values, _ *slog.Logger) error {
		got = n.Get(v)
		return nil
	})
	var stderr strings.Builder
	require.Equal(t, command.ExitOK, command.Run(s, nil, io.Discard, &stderr))
	require.EqualValues(t, 7, got)
	require.NotContains(t, stderr.String(), "FELIX_OTHER_PROGRAM")
}

// A misspelled knob (FELIX_SUBSCRIBER_QUEU=5 only warned and the broker
// started) stops the start with status 2, naming the knob meant, unless
// FELIX_ALLOW_UNKNOWN_KNOBS lets it through with a warning.
func TestUnknownKnobStopsTheStart(t *testing.T) {
	t.Setenv("FELIX_TEST_M", "5")
	served := false
	s, _ := spec(func(context.Context, *knob.Values, *slog.Logger) error { served = true; return nil })
	var stderr strings.Builder
	require.Equal(t, command.ExitConfig, command.Run(s, nil, io.Discard, &stderr))
	require.False(t, served)
	require.Contains(t, stderr.String(), "FELIX_TEST_M: unknown knob (did you mean FELIX_TEST_N?)")
	require.Contains(t, stderr.String(), "FELIX_ALLOW_UNKNOWN_KNOBS=true")

	t.Setenv("FELIX_ALLOW_UNKNOWN_KNOBS", "true")
	stderr.Reset()
	require.Equal(t, command.ExitOK, command.Run(s, nil, io.Discard, &stderr))
	require.True(t, served)
	require.Contains(t, stderr.String(), "unknown knob ignored (see `felix-test env`)")
	require.Contains(t, stderr.String(), "FELIX_TEST_M")
}

func TestRunExitStatuses(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want int
	}{
		"nil":          {nil, command.ExitOK},
		"failure":      {errors.New("disk on fire"), command.ExitFailed},
		"config error": {fmt.Errorf("%w: no such file", errConfig), command.ExitConfig},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := spec(func(context.Context, *knob.Values, *slog.Logger) error { return tc.err })
			var stderr strings.Builder
			require.Equal(t, tc.want, command.Run(s, []string{"run"}, io.Discard, &stderr))
			if tc.err != nil {
				require.Contains(t, stderr.String(), "test server failed")
			}
		})
	}
}

func TestBadKnobStopsBeforeServing(t *testing.T) {
	t.Setenv("FELIX_TEST_N", "12")
	s, _ := spec(func(context.Context, *knob.Values, *slog.Logger) error {
		t.Fatal("served with a bad knob")
		return nil
	})
	var stderr strings.Builder
	require.Equal(t, command.ExitConfig, command.Run(s, nil, io.Discard, &stderr))
	require.Contains(t, stderr.String(), `felix-test: invalid configuration`)
	require.Contains(t, stderr.String(), `FELIX_TEST_N="12": out of range`)

	var stdout strings.Builder
	require.Equal(t, command.ExitConfig, command.Run(s, []string{"env"}, &stdout, io.Discard),
		"env prints the table and still reports the bad knob")
	require.Contains(t, stdout.String(), "FELIX_TEST_N")
}

func TestEnvHelpAndUnknownCommands(t *testing.T) {
	s, _ := spec(nil)
	var out strings.Builder
	require.Equal(t, command.ExitOK, command.Run(s, []string{"env", "-markdown"}, &out, io.Discard))
	require.Contains(t, out.String(), "| `FELIX_TEST_N` |")
	out.Reset()
	for _, help := range []string{"help", "--help", "-h"} {
		out.Reset()
		require.Equal(t, command.ExitOK, command.Run(s, []string{help}, &out, io.Discard))
		require.True(t, strings.HasPrefix(out.String(), "usage: felix-test [run | env [--markdown] | version]\n"), out.String())
	}
	for _, v := range []string{"version", "--version"} {
		out.Reset()
		require.Equal(t, command.ExitOK, command.Run(s, []string{v}, &out, io.Discard))
		require.True(t, strings.HasPrefix(out.String(), "felix-test "), out.String())
	}
	var stderr strings.Builder
	require.Equal(t, command.ExitConfig, command.Run(s, []string{"frobnicate"}, io.Discard, &stderr))
	require.Contains(t, stderr.String(), `unknown command "frobnicate"`)
	require.Equal(t, command.ExitConfig, command.Run(s, []string{"env", "-bogus"}, io.Discard, io.Discard))
}

func TestREADMETable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	const begin, end = "<!-- k:begin -->\n", "<!-- k:end -->"
	require.NoError(t, os.WriteFile(path, []byte("intro\n"+begin+"old\n"+end+"\noutro\n"), 0o644))
	require.ErrorIs(t, command.READMETable(path, begin, end, "new\n", false), command.ErrStaleTable)
	require.NoError(t, command.READMETable(path, begin, end, "new\n", true))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "intro\n"+begin+"new\n"+end+"\noutro\n", string(raw))
	require.NoError(t, command.READMETable(path, begin, end, "new\n", false))
	require.ErrorContains(t, command.READMETable(path, "<!-- x -->", end, "new\n", false), "lacks the markers")
}
