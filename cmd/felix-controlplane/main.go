// Command felix-controlplane runs the Felix control plane configured by
// FELIX_CP_* knobs.
//
//	felix-controlplane          run it
//	felix-controlplane env      print every knob: default, current value, allowed values, doc
//	felix-controlplane env -markdown   print the README knob table
package main

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
)

// Exit statuses, as felix-broker's: 2 means "fix the deployment".
const (
	exitOK     = 0
	exitFailed = 1
	exitConfig = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runControlPlane(stderr)
	case "env":
		return runEnv(args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, "usage: felix-controlplane [run | env [-markdown]]")
		return exitOK
	}
	fmt.Fprintf(stderr, "felix-controlplane: unknown command %q (want run or env)\n", cmd)
	return exitConfig
}

func runEnv(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	md := fs.Bool("markdown", false, "print the README knob table")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if *md {
		fmt.Fprint(stdout, registry.Markdown())
		return exitOK
	}
	vals, err := registry.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "felix-controlplane: invalid configuration:\n%v\n", err)
		vals = nil
	}
	if err := registry.WriteTable(stdout, vals); err != nil {
		return exitFailed
	}
	if err != nil {
		return exitConfig
	}
	return exitOK
}

func runControlPlane(stderr io.Writer) int {
	vals, err := registry.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "felix-controlplane: invalid configuration:\n%v\n", err)
		return exitConfig
	}
	log := newLogger(stderr, knobLogLevel.Get(vals), knobLogFormat.Get(vals))
	for _, name := range registry.Unknown(os.Environ()) {
		log.Warn("unknown knob ignored (see `felix-controlplane env`)", "knob", name)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, vals, log); err != nil {
		log.Error("control plane failed", "err", err)
		if errors.Is(err, errConfig) {
			return exitConfig
		}
		return exitFailed
	}
	return exitOK
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // validated by the registry
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
