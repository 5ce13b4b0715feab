package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// Config is one felixtrace run.
type Config struct {
	// Admin is the broker's admin HTTP address, HOST:PORT or a URL.
	Admin    string
	Interval time.Duration
	// Duration ends the run after Duration/Interval samples (rounded up);
	// 0 runs until the context ends (Ctrl-C).
	Duration time.Duration
	// BPF opens the eBPF probes of cpuprofile on this host.
	BPF      bool
	JSONFile string
	// Top is how many threads and connections the table shows.
	Top int
}

const usageText = `usage: felixtrace [flags]

Attaches to a running Felix broker's admin endpoint (/debug/felix/stats) and
prints a table every --interval: per connection (remote address, role:
publisher, subscriber, pub+sub, peer for another broker, or client; tenant
and principal of its token; smoothed RTT, MTU, packets lost and congestion
events in the interval, bytes in and out per second, the streams it
publishes to or follows), per stream (events published per second, payload
bytes per second, acks per second with their latency p50/p99 in the
interval, events delivered and dropped per second, subscribers), the
broker's OS threads by CPU, group commit (syncs/s, publish batches per sync,
sync latency p50/p99), fanout (subscriptions, deepest subscriber queue,
drops/s), caches (ops/s by op, entries, watchers), rosters (members, joins,
leaves), consumer groups (lag, in flight, deliveries, acks and redeliveries
per second), each replica of a replicated shard the broker holds (raft role,
term and leader, commit and applied index, pending proposals, quorum acks
per second and their mean wait, each follower's lag in records on a
leader), the goroutines by role and the machine's CPU split (user, system,
softirq, iowait). Ctrl-C or --duration ends the run with a summary:
totals, means and maxima per column, and per stream over the run.

Rates come from two scrapes; the broker keeps no state per scraper, so
several felixtraces (and Prometheus) can watch one broker. CPU figures need a
broker on Linux. Thread CPU% is of one CPU (as top prints it); the system
split is % of all the CPUs of the broker's host. The Go runtime's threads
carry the process's name; only ioruntime's pinned I/O threads have their own
(felix-io-N). Goroutines move between threads, so the group-commit flusher
and completer (pprof labels felix-commit, felix-commit-complete) have no
thread of their own: ROLES counts the goroutines by label, and
/debug/pprof/profile on the same admin address shows their CPU by label.
Latency quantiles are the upper bounds of the broker's buckets (≤).

--bpf loads the eBPF probes (softirq time per vector, block I/O latency) into
the kernel felixtrace runs on, so it only describes the broker when both run
on the same host. It needs root (or CAP_BPF and CAP_PERFMON) and tracefs: as
root felixtrace mounts tracefs when it is missing, otherwise it prints the
command that does (mount -t tracefs nodev /sys/kernel/tracing). Without them
felixtrace says so in one line and keeps to the /proc numbers.

--json FILE gets one JSON object per line: {"start": ...} first, then
{"sample": ...} per interval, then {"summary": ...} at exit. Durations are in
nanoseconds (*_ns), rates per second (*_per_s), CPU shares in percent (*_pct).

Exit status: 0 ok, 1 the broker could not be reached or --json failed, 2 usage.

Flags:`

// defaultAdmin is what cmd/felix-broker binds without FELIX_ADMIN_BIND
// (make run).
const defaultAdmin = "127.0.0.1:8080"

// parseFlags parses and validates the command line. The returned error is a
// usage error; flag.ErrHelp for --help.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	set := flag.NewFlagSet("felixtrace", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, usageText); set.PrintDefaults() }
	var cfg Config
	set.StringVar(&cfg.Admin, "admin", defaultAdmin, "broker admin HTTP address `host:port` (FELIX_ADMIN_BIND) or URL")
	set.DurationVar(&cfg.Interval, "interval", time.Second, "time between samples")
	set.DurationVar(&cfg.Duration, "duration", 0, "stop after this long and print the summary; 0: until Ctrl-C")
	set.BoolVar(&cfg.BPF, "bpf", false, "add eBPF softirq and block I/O probes of this host (root; see above)")
	set.StringVar(&cfg.JSONFile, "json", "", "write every sample and the summary to `FILE` (JSON lines)")
	set.IntVar(&cfg.Top, "top", 8, "show the `N` busiest threads and connections")
	if err := set.Parse(args); err != nil {
		return Config{}, err
	}
	if set.NArg() != 0 {
		return Config{}, fmt.Errorf("unexpected argument %q (flags only)", set.Arg(0))
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	switch {
	case c.Admin == "":
		return fmt.Errorf("--admin is empty")
	case c.Interval < 10*time.Millisecond:
		return fmt.Errorf("--interval %v: want at least 10ms", c.Interval)
	case c.Duration < 0:
		return fmt.Errorf("--duration %v is negative", c.Duration)
	case c.Top < 1:
		return fmt.Errorf("--top %d: want at least 1", c.Top)
	}
	return nil
}

// samples is how many intervals a run with a Duration takes; 0 is no limit.
func (c Config) samples() int {
	if c.Duration <= 0 {
		return 0
	}
	return int((c.Duration + c.Interval - 1) / c.Interval)
}
