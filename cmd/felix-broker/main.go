// Command felix-broker runs a Felix broker configured by FELIX_* knobs.
//
//	felix-broker          run the broker
//	felix-broker env      print every knob: default, current value, allowed values, doc
//	felix-broker env -markdown   print the README knob table
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

	"github.com/felixmq/felix/internal/knob"
)

// Exit statuses: 2 is reserved for configuration errors so that scripts and
// supervisors can tell "fix the deployment" from "the broker failed".
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
		return runBroker(stderr)
	case "env":
		return runEnv(args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, "usage: felix-broker [run | env [-markdown]]")
		return exitOK
	}
	fmt.Fprintf(stderr, "felix-broker: unknown command %q (want run or env)\n", cmd)
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
		fmt.Fprintf(stderr, "felix-broker: invalid configuration:\n%v\n", err)
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

// loadConfig validates every knob; the error names each bad knob.
func loadConfig(stderr io.Writer) (*knob.Values, *slog.Logger, error) {
	vals, err := registry.Load(os.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	log := newLogger(stderr, knobLogLevel.Get(vals), knobLogFormat.Get(vals))
	for _, name := range registry.Unknown(os.Environ()) {
		log.Warn("unknown knob ignored (see `felix-broker env`)", "knob", name)
	}
	return vals, log, nil
}

func runBroker(stderr io.Writer) int {
	vals, log, err := loadConfig(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "felix-broker: invalid configuration:\n%v\n", err)
		return exitConfig
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, vals, log); err != nil {
		log.Error("broker failed", "err", err)
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
