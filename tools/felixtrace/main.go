// Command felixtrace watches a running Felix broker: each interval it reads
// the broker's /debug/felix/stats and prints per-connection QUIC figures
// (role, tenant and principal, RTT, MTU, losses, congestion events, bytes,
// streams), per-stream publish, ack and delivery rates with ack latency,
// CPU per OS thread, group commit batching and sync latency, fanout queue
// depths and drops, caches, rosters and consumer groups, the raft state of
// the broker's replicas of replicated shards, goroutines by role, and the
// host's softirq and iowait shares; with --bpf, as root on the broker's
// host, also softirq time per vector and block I/O latency from
// cpuprofile's eBPF probes. Ctrl-C or --duration ends it with a summary.
//
// Files: flags.go (flags, --help), scrape.go (the admin endpoint),
// sample.go (one interval from two scrapes: a pure function), streams.go
// (streams, caches, rosters, queues, roles), replicas.go (replicated
// shards), bpf.go and tracefs.go (the probes and their graceful absence),
// summary.go (the run), table.go (the text output) and run.go (the loop
// and --json).
//
// The broker's counters are cumulative and it keeps no state per client;
// every rate here is the difference of two scrapes over the broker's own
// clock between them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal ends the run with its summary; a second one kills
	// the process.
	context.AfterFunc(ctx, stop)
	os.Exit(cli(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// cli runs the command line: tables on stdout, problems on stderr.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "felixtrace: %v\n(felixtrace --help lists the flags)\n", err)
		return exitUsage
	}
	if _, err := run(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "felixtrace: %v\n", err)
		return exitFail
	}
	return exitOK
}
