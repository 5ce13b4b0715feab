// Package command is the shape every Felix server binary shares: the `run`,
// `env [-markdown]`, `version` and `help` subcommands, knob validation before anything
// starts, the logger the FELIX_LOG_* knobs ask for, unknown FELIX_*
// variables refused (or, when allowed, warned about), SIGTERM/SIGINT ending
// the run, and the exit statuses scripts and supervisors rely on.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/internal/knob"
)

// Exit statuses: 2 is reserved for configuration errors so that scripts and
// supervisors can tell "fix the deployment" from "the server failed".
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitConfig = 2
)

// Spec describes one binary.
type Spec struct {
	// Name is the binary's name, leading its messages ("felix-broker").
	Name string
	// What names the server in its failure log line ("broker").
	What string
	// Registry holds every knob the binary reads.
	Registry *knob.Registry
	// LogLevel and LogFormat are the binary's FELIX_LOG_LEVEL and
	// FELIX_LOG_FORMAT knobs.
	LogLevel, LogFormat knob.Enum
	// AllowUnknown is the binary's FELIX_ALLOW_UNKNOWN_KNOBS: with it an
	// unknown FELIX_* variable is only warned about; without it, it stops
	// the start (ExitConfig), naming the closest knob.
	AllowUnknown knob.Bool
	// Foreign reports FELIX_* names that belong to another Felix program
	// (a shared environment sets both): they are neither refused nor
	// warned about. Nil: none.
	Foreign func(name string) bool
	// Serve runs the server until ctx ends (SIGTERM or SIGINT).
	Serve func(ctx context.Context, vals *knob.Values, log *slog.Logger) error
	// ErrConfig, returned (wrapped) by Serve, means the deployment is
	// wrong: the exit status is then ExitConfig instead of ExitFailed.
	ErrConfig error
}

// Run runs the subcommand in args (none: run) and returns the exit status.
func Run(s Spec, args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return s.run(stderr)
	case "env":
		return s.env(args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprintf(stdout, "usage: %s [run | env [--markdown] | version]\n"+
			"Configured by FELIX_* environment variables: %s env lists them.\n", s.Name, s.Name)
		return ExitOK
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, cli.VersionLine(s.Name))
		return ExitOK
	}
	fmt.Fprintf(stderr, "%s: unknown command %q (want run, env or version)\n", s.Name, cmd)
	return ExitConfig
}

// env prints every knob with its current value, or the README table.
func (s Spec) env(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	md := fs.Bool("markdown", false, "print the README knob table")
	if err := fs.Parse(args); err != nil {
		return ExitConfig
	}
	if *md {
		fmt.Fprint(stdout, s.Registry.Markdown())
		return ExitOK
	}
	vals, err := s.Registry.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%v\n", s.Name, err)
		vals = nil
	}
	if err := s.Registry.WriteTable(stdout, vals); err != nil {
		return ExitFailed
	}
	if err != nil {
		return ExitConfig
	}
	return ExitOK
}

// run validates every knob (all bad values reported at once) and serves.
func (s Spec) run(stderr io.Writer) int {
	vals, err := s.Registry.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%v\n", s.Name, err)
		return ExitConfig
	}
	log := NewLogger(stderr, s.LogLevel.Get(vals), s.LogFormat.Get(vals))
	if unknown := s.unknown(); len(unknown) > 0 {
		if !s.AllowUnknown.Get(vals) {
			fmt.Fprintf(stderr, "%s: invalid configuration:\n", s.Name)
			for _, name := range unknown {
				fmt.Fprintf(stderr, "%s: unknown knob%s\n", name, s.didYouMean(name))
			}
			fmt.Fprintf(stderr, "(see `%s env`; %s=true starts with unknown knobs ignored)\n", s.Name, s.AllowUnknown.Name)
			return ExitConfig
		}
		for _, name := range unknown {
			log.Warn(fmt.Sprintf("unknown knob ignored (see `%s env`)", s.Name), "knob", name)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := s.Serve(ctx, vals, log); err != nil {
		log.Error(s.What+" failed", "err", err)
		if s.ErrConfig != nil && errors.Is(err, s.ErrConfig) {
			return ExitConfig
		}
		return ExitFailed
	}
	return ExitOK
}

// NewLogger is the logger of FELIX_LOG_LEVEL (a level slog parses) and
// FELIX_LOG_FORMAT (text or json), writing to w.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // validated by the registry
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// unknown lists the FELIX_* variables of the environment that no knob of
// the binary declares and Foreign does not claim.
func (s Spec) unknown() []string {
	var out []string
	for _, name := range s.Registry.Unknown(os.Environ()) {
		if s.Foreign == nil || !s.Foreign(name) {
			out = append(out, name)
		}
	}
	return out
}

// didYouMean names the declared knob closest to name, if one is close
// enough to be the intended one.
func (s Spec) didYouMean(name string) string {
	var names []string
	for _, k := range s.Registry.Knobs() {
		names = append(names, k.Name)
	}
	if best := cli.Closest(name, names, len(name)/4+1); best != "" {
		return " (did you mean " + best + "?)"
	}
	return ""
}
