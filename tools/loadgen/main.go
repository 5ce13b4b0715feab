// Command felix-loadgen drives a Felix broker with N publishers and M
// subscribers and reports throughput, ack and publish→delivery latency
// (HDR-style histograms), and exact per-subscriber accounting.
//
// Files: flags.go (flags, profiles, validation), conn.go (TLS, dialing),
// streams.go (admin API: create or find streams, shard stats), run.go (one
// round: connect, publish, drain), publisher.go and subscriber.go (the
// workers), histogram.go, transport.go (the undersized-run check), floor.go
// (--floor: the bare round trip each round is compared with),
// result.go (what a run measured) and report.go (progress, table, JSON).
// --scenario other than pubsub: scenario.go (shared clock, bounds, checks,
// rounds), scenario_flags.go, scenario_result.go, scenario_report.go and
// one scenario_<name>.go per scenario (cache, counter, watch, roster,
// queue); each ends with accounting checks that must all hold.
//
// Accounting. Every subscriber follows every shard of its stream and is
// subscribed before the first publish, so it must account for every message
// its stream's publishers got the broker to take: delivered + dropped (as the
// broker's gap reports say) == published. The difference, "unaccounted", is
// an error and makes the exit status 1. Warm-up messages are part of the
// accounting; rates and latencies exclude them by each publisher's first
// measured sequence number.
//
// Payload layout (big-endian), when the payload has at least 16 bytes:
// publisher id (4: a random per-round tag in the high 16 bits, the
// publisher's index in the low 16), sequence (4), intended send time in unix
// nanoseconds (8). The rest is zero.
//
// Exit status: 0 ok, 1 the run failed or its accounting is off, 2 usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/udp/netknobs"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	if code, ok := childMain(os.Stdin, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal ends publishing and still reports; a second one
	// kills the process.
	context.AfterFunc(ctx, stop)
	os.Exit(cliMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// cli runs the command line: progress and warnings on stderr, the table on
// stdout, --json to its file.
func cliMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch {
		case args[0] == "report":
			return runReport(args[1:], stdout, stderr)
		case cli.IsVersion(args[0]):
			fmt.Fprintln(stdout, cli.VersionLine("felix-loadgen"))
			return exitOK
		case args[0] == "help":
			args = []string{"--help"}
		}
	}
	cfg, err := parseFlags(args, stdout)
	if errors.Is(err, cli.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix-loadgen: %v\n(felix-loadgen --help lists the flags)\n", err)
		return exitUsage
	}
	cfg.Log = stderr
	if cfg.Net, err = netknobs.Load(os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "felix-loadgen: %v\n", err)
		return exitUsage
	}
	if proxy.on {
		if err := proxy.validate(); err != nil {
			fmt.Fprintf(stderr, "felix-loadgen: %v\n", err)
			return exitUsage
		}
		via, stop, err := proxy.start(cfg.Addr, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "felix-loadgen: %v\n", err)
			return exitFail
		}
		defer stop()
		cfg.Addr = via
	}
	if cfg.Scenario != "pubsub" {
		return cliScenario(ctx, cfg, stdout, stderr)
	}
	res, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "felix-loadgen: %v\n", err)
		if len(res.Rounds) == 0 {
			return exitFail
		}
	}
	writeTable(stdout, &res)
	warnUndersized(stderr, &res)
	if cfg.JSONFile != "" {
		if werr := writeJSONFile(cfg.JSONFile, &res); werr != nil {
			fmt.Fprintf(stderr, "felix-loadgen: --json: %v\n", werr)
			return exitFail
		}
	}
	if err != nil {
		return exitFail
	}
	if s := res.Summary; s.Unaccounted != 0 || s.Duplicates != 0 || s.Errors > 0 || s.PublishFailed > 0 {
		fmt.Fprintf(stderr, "felix-loadgen: FAILED: %d unaccounted event(s), %d duplicate(s), %d error(s), %d failed publish(es)\n",
			s.Unaccounted, s.Duplicates, s.Errors, s.PublishFailed)
		for _, r := range res.Rounds {
			for _, e := range r.Errors {
				fmt.Fprintf(stderr, "  round %d: %s\n", r.Round, e)
			}
		}
		return exitFail
	}
	return exitOK
}

// warnUndersized prints one warning per undersized round.
func warnUndersized(w io.Writer, res *Result) {
	for _, r := range res.Rounds {
		t := r.Transport
		if !t.Undersized {
			continue
		}
		fmt.Fprintf(w, "warning: undersized run: round %d published %.1f MB, less than %d × the %.1f MB "+
			"the QUIC receive windows can hold in flight (--stream-window/--conn-window); its rates mostly "+
			"measure filling buffers: raise --duration or --count\n",
			r.Round, float64(t.PublishedBytes)/1e6, t.Factor, float64(t.AbsorbBytes)/1e6)
	}
}
