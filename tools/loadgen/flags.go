package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/endpoint"
	"github.com/felixmq/felix/internal/knob"
	"github.com/felixmq/felix/udp/netknobs"
)

// logger is where the clients' connection stats and warnings go: the
// progress writer, as text.
func (c *Config) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(c.Log, nil))
}

// Config is one load generator invocation: what run needs, already
// validated (parseFlags and tests build it).
type Config struct {
	Addr      string // broker QUIC address
	Admin     string // broker admin HTTP address (stream creation, stats); "" skips it
	Tenant    string
	Namespace string
	Token     string
	TLS       *tls.Config

	Profile string // latency | throughput

	// Scenario is pubsub (the publishers × subscribers run) or one of the
	// scenarios of scenario.go; the fields below apply to those.
	Scenario  string
	Cache     string // cache of cache, counter and watch; "" picks loadgen-cache-<ephemeral|fsync>
	Op        string // cache: putget | get | put | mixed
	ValueSize int
	Keys      int // cache: keys per worker; counter: keys shared by the workers
	Workers   int
	Watchers  int
	Members   int
	Consumers int

	StreamPrefix string // "" picks loadgen-<shards>s-<ephemeral|fsync mode>
	Streams      int
	Shards       int
	Create       bool
	Durable      bool
	Fsync        string // on_commit | periodic | never; durable only

	Publishers  int
	Subscribers int
	Payload     int
	Batch       int
	Ack         string // none | each | batch
	Inflight    int    // acked publishes outstanding per publisher
	// Floor measures the transport's floor before each round (floor.go).
	Floor bool
	// Idempotent publishes acked batches through an idempotent producer
	// (client.IdempotentPublisher), each publisher to shard id mod shards.
	Idempotent bool
	Rate       float64

	Duration time.Duration // measured phase; 0 when Count bounds the run
	Count    int64         // measured messages over all publishers; 0 when Duration bounds it
	Warmup   time.Duration
	Repeat   int

	Slow       int
	SlowDelay  time.Duration
	SlowWindow int64 // receive window of slow subscribers' connections; 0: StreamWindow/ConnWindow

	// Pause subscribers (after the slow ones) stop reading PauseAt after
	// the measured phase starts, for PauseFor, then read at full speed.
	Pause    int
	PauseAt  time.Duration
	PauseFor time.Duration

	StreamWindow int64 // QUIC receive windows, as FELIX_QUIC_STREAM_RECV_WINDOW / _CONN_
	ConnWindow   int64

	Retries      int
	DrainTimeout time.Duration
	DialTimeout  time.Duration

	JSONFile string
	Log      io.Writer // progress lines each second and notes; nil: none
	// Net are FELIX_INITIAL_MTU, FELIX_CONN_STATS_MS and
	// FELIX_MTU_BLACK_HOLE_COOLDOWN_MS from the environment (main loads them).
	Net netknobs.Values
}

// profile holds what --profile sets; explicit flags override each field.
type profile struct {
	publishers, subscribers, shards, batch, inflight int
	ack                                              string
}

var profiles = map[string]profile{
	// One message per acked publish, one outstanding: the latency of a
	// single publish. The broker must run with delivery batching off
	// (FELIX_EVENT_BATCH_MAX_EVENTS=1, FELIX_EVENT_BATCH_MAX_DELAY_US=0).
	"latency": {publishers: 1, subscribers: 1, shards: 1, batch: 1, inflight: 1, ack: "each"},
	// Batches of 64, fire-and-forget, four publishers over four shards; the
	// broker keeps its default delivery batching.
	"throughput": {publishers: 4, subscribers: 1, shards: 4, batch: 64, inflight: 16, ack: "none"},
}

const (
	headerBytes      = 16 // publisher id, sequence, send time
	maxPublishers    = 1 << 16
	frameLimit       = 16 << 20 // wire.DefaultMaxFrameBytes
	frameOverhead    = 64 << 10 // header, names and per-payload lengths, generously
	minWindow        = 64 << 10
	defaultStreamWin = 16 << 20 // broker.Config and client.Config defaults
	defaultConnWin   = 64 << 20
)

const usageText = `usage: felix-loadgen [flags]

Publishes to and subscribes from a Felix broker and reports msg/s, MB/s, ack
latency and publish->delivery latency (p50/p90/p99/p999), per-subscriber
accounting (delivered + dropped must equal published: "unaccounted" is an
error), and publisher retries. A progress line goes to stderr each second, a
table to stdout at the end, everything to --json FILE.

Profiles (explicit flags override them):
  latency     1 publisher, 1 subscriber, 1 shard, batch 1, --ack each, --inflight 1.
              Run the broker with delivery batching off:
              FELIX_EVENT_BATCH_MAX_EVENTS=1 FELIX_EVENT_BATCH_MAX_DELAY_US=0
  throughput  4 publishers over 4 shards, batch 64, --ack none (fire-and-forget);
              the broker keeps its default delivery batching.

Payloads of 16 bytes or more start with publisher id (4), sequence (4) and
the intended send time in unix ns (8); smaller payloads carry nothing, so
delivery latency is n/a for them (messages are still counted). Latency is
measured from the intended send time: with --rate that is the paced slot, so
a stalled broker shows up as latency instead of a slower sender (no
coordinated omission); unpaced, the moment a publish could go (fewer than
--inflight outstanding). With --inflight 1 the publisher waits for each ack
itself. Delivery latency compares clocks of the publishing and the
subscribing host: both are this process.

Every subscriber follows every shard of one stream and is subscribed before
the first publish. --warmup traffic is excluded from rates and latencies by
sequence number (each publisher's first measured sequence), not by arrival
time, but it is part of the accounting. Slow subscribers sleep --slow-delay
per event while publishers run and drain at full speed afterwards. The
broker picks each publisher's shard (sticky per connection); the report
shows the events per shard.

A throughput run that publishes less than 4× what the QUIC receive windows
can hold in flight prints "warning: undersized run:" (and "undersized": true
in the JSON): its rate mostly measures filling buffers.

Scenarios (--scenario; pubsub is everything above):
  cache    --workers N each put then get their own --keys (or --op get|put|mixed),
           --value-size bytes; latency per op; a get must return what the same
           worker last put (mismatches must be 0)
  counter  --workers N counter_add on --keys shared keys; at the end each key's
           counter_get must equal the sum of the acked deltas
  watch    one writer puts one key at --rate, --watchers N on their own
           connections; put->delivery latency, unaccounted = puts - delivered
           - dropped per watcher (must be 0)
  roster   --members N joined (64 per connection), then a late joiner's watch
           until its snapshot is complete, --count times; its size must be N
  queue    --count records of --payload bytes published to a fresh durable
           stream of --shards shards, drained by --consumers K of one group
           with batched AckAsync; every record acked once (redeliveries
           counted)
Cache, counter and watch use --cache (created with --create, --durable
--fsync honoured); roster and queue names are fresh each round.

Flags:`

// rawFlags are the flags parsed into Config only after the profile applied.
type rawFlags struct {
	ca, fingerprint, payload    string
	streamWin, connWin, slowWin string
	ep                          endpoint.Endpoints // where the broker is when flags do not say
	epErr                       error
}

// proxy is --via-proxy and its impairments (proxy.go); main reads it.
var proxy proxyFlags

// defineFlags registers every flag on set, writing into cfg and raw.
func defineFlags(set *flag.FlagSet, cfg *Config, raw *rawFlags) {
	raw.ep, raw.epErr = endpoint.Resolve(os.LookupEnv)
	ep := raw.ep
	set.StringVar(&cfg.Addr, "addr", ep.Addr.V, "broker QUIC address `host:port` (else $FELIX_ADDR, the context, a local broker's broker.json)")
	proxy = proxyFlags{}
	proxy.define(set)
	set.StringVar(&cfg.Admin, "admin", ep.Admin.V, "broker admin HTTP address `host:port` for creating streams and shard stats (else $FELIX_ADMIN, the context, a local broker's); empty: none")
	set.StringVar(&cfg.Tenant, "tenant", ep.Tenant.V, "tenant (else $FELIX_TENANT, the context)")
	set.StringVar(&cfg.Namespace, "namespace", "default", "namespace")
	set.StringVar(&cfg.Token, "token", "", "auth `TOKEN` (else $FELIX_TOKEN, the context's token file, the dev directory's token)")
	set.StringVar(&raw.ca, "ca", ep.CA.V, "PEM `FILE` of certificates to trust (else $FELIX_CA, the context, the dev directory's cert.pem)")
	set.StringVar(&raw.fingerprint, "fingerprint", "", "pin the broker certificate's SHA-256 (`HEX`) instead of --ca")
	set.StringVar(&cfg.Profile, "profile", "latency", "`name`: latency or throughput (see above)")
	set.StringVar(&cfg.StreamPrefix, "stream", "", "stream name (with --streams N > 1: `PREFIX`-0..N-1); empty: loadgen-<shards>s-<ephemeral|fsync>")
	set.IntVar(&cfg.Streams, "streams", 1, "number of streams; publishers and subscribers are spread round-robin")
	set.IntVar(&cfg.Shards, "shards", 0, "shards per created stream (profile default)")
	set.BoolVar(&cfg.Create, "create", true, "create the streams through the admin API (an existing stream is used as it is)")
	set.BoolVar(&cfg.Durable, "durable", false, "create durable streams (the broker needs FELIX_DATA_DIR)")
	set.StringVar(&cfg.Fsync, "fsync", "", "fsync `mode` of durable streams: on_commit, periodic (the broker's default) or never")
	set.IntVar(&cfg.Publishers, "publishers", 0, "publishers, each on its own connection (profile default)")
	set.IntVar(&cfg.Subscribers, "subscribers", 0, "subscribers, each on its own connection, following every shard of one stream (profile default; 0: publish only)")
	set.StringVar(&raw.payload, "payload", "256", "payload `size` in bytes (suffix KiB, MiB allowed)")
	set.IntVar(&cfg.Batch, "batch", 0, "messages per publish (profile default)")
	set.StringVar(&cfg.Ack, "ack", "", "`mode`: none (fire-and-forget Send), each (one acked publish per message) or batch (one ack per --batch); profile default")
	set.IntVar(&cfg.Inflight, "inflight", 0, "acked publishes outstanding per publisher (profile default; at most 64 with --idempotent)")
	set.BoolVar(&cfg.Floor, "floor", false, "before each round, time a bare quic-go round trip (the frame of one acked publish and its ack, one at a time, to a child process on the broker's transport configuration) for --duration after --warmup, and report ack and delivery latency and the broker's CPU per publish against it")
	set.BoolVar(&cfg.Idempotent, "idempotent", true, "acked publishes go through an idempotent producer (exactly once; publisher i to shard i mod --shards); false: plain acked publishes, the broker picking the shard")
	set.Float64Var(&cfg.Rate, "rate", 0, "total publish rate in `msg/s`, evenly paced over publishers; latency counts from each paced slot (no coordinated omission); 0: as fast as possible")
	set.DurationVar(&cfg.Duration, "duration", 10*time.Second, "length of the measured phase (after --warmup)")
	set.Int64Var(&cfg.Count, "count", 0, "measured messages over all publishers, instead of --duration")
	set.DurationVar(&cfg.Warmup, "warmup", time.Second, "publish this long before measuring")
	set.IntVar(&cfg.Repeat, "repeat", 1, "rounds, each with fresh connections; the report gives min/median/max")
	set.IntVar(&cfg.Slow, "slow", 0, "how many subscribers are slow")
	set.DurationVar(&cfg.SlowDelay, "slow-delay", 20*time.Millisecond, "time a slow subscriber spends per event")
	set.IntVar(&cfg.Pause, "pause", 0, "how many subscribers (after the --slow ones) stop reading for --pause-for, --pause-at into the measured phase")
	set.DurationVar(&cfg.PauseAt, "pause-at", 4*time.Second, "when paused subscribers stop reading, after the warm-up")
	set.DurationVar(&cfg.PauseFor, "pause-for", 2*time.Second, "how long paused subscribers stop reading")
	set.StringVar(&raw.slowWin, "slow-window", "0", "QUIC receive window per stream (`size`) of slow subscribers' connections, 4× per connection; small windows make their backlog reach the broker's queue; 0: --stream-window/--conn-window")
	set.StringVar(&raw.streamWin, "stream-window", knob.FormatBytes(defaultStreamWin), "QUIC receive window per stream (`size`, FELIX_QUIC_STREAM_RECV_WINDOW): the loadgen's connections use it and the undersized-run check assumes the broker does")
	set.StringVar(&raw.connWin, "conn-window", knob.FormatBytes(defaultConnWin), "QUIC receive window per connection (`size`, FELIX_QUIC_CONN_RECV_WINDOW), as --stream-window")
	set.IntVar(&cfg.Retries, "retries", 3, "re-sends of an acked publish the broker refused (counted as retries)")
	set.DurationVar(&cfg.DrainTimeout, "drain-timeout", 10*time.Second, "after publishing, how long subscribers may go without progress before the rest counts as unaccounted")
	set.DurationVar(&cfg.DialTimeout, "timeout", 5*time.Second, "timeout for connecting, subscribing and admin requests")
	set.StringVar(&cfg.JSONFile, "json", "", "write the whole result to `FILE`")
	defineScenarioFlags(set, cfg)
}

// parseFlags parses and validates the command line. The returned error is a
// usage error; flag.ErrHelp for --help.
func parseFlags(args []string, stdout io.Writer) (Config, error) {
	set := flag.NewFlagSet("felix-loadgen", flag.ContinueOnError)
	var cfg Config
	var raw rawFlags
	defineFlags(set, &cfg, &raw)
	pos, err := cli.Parse(set, args)
	if errors.Is(err, cli.ErrHelp) {
		cli.PrintUsage(stdout, usageText, set)
	}
	if err != nil {
		return Config{}, err
	}
	given := map[string]bool{}
	set.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if len(pos) != 0 {
		return Config{}, fmt.Errorf("unexpected argument %q (flags only)", pos[0])
	}
	if raw.epErr != nil {
		return Config{}, raw.epErr
	}
	if err := applyProfile(&cfg, given); err != nil {
		return Config{}, err
	}
	if err := applyScenario(&cfg, given); err != nil {
		return Config{}, err
	}
	sizes := []struct {
		flag string
		s    string
		dst  *int64
	}{{"--stream-window", raw.streamWin, &cfg.StreamWindow}, {"--conn-window", raw.connWin, &cfg.ConnWindow}, {"--slow-window", raw.slowWin, &cfg.SlowWindow}}
	for _, sz := range sizes {
		n, err := knob.ParseBytes(sz.s)
		if err != nil {
			return Config{}, fmt.Errorf("%s %q: want a size such as 65536, 64KiB or 16MiB", sz.flag, sz.s)
		}
		*sz.dst = n
	}
	n, err := knob.ParseBytes(raw.payload)
	if err != nil || n > frameLimit {
		return Config{}, fmt.Errorf("--payload %q: want a size from 0 to 16MiB", raw.payload)
	}
	cfg.Payload = int(n)
	if given["count"] {
		if given["duration"] {
			return Config{}, errors.New("pass --duration or --count, not both")
		}
		cfg.Duration = 0
	}
	if given["inflight"] && cfg.Ack == "none" {
		return Config{}, errors.New("--inflight applies to acked publishes (--ack each or batch), not --ack none")
	}
	if cfg.Durable && cfg.Fsync == "" {
		cfg.Fsync = "periodic"
	}
	if cfg.TLS, err = tlsConfig(raw.ca, given["ca"], raw.fingerprint); err != nil {
		return Config{}, err
	}
	if cfg.Token, err = devdir.Token(cfg.Token, os.LookupEnv, raw.ep.TokenFile.V); err != nil {
		return Config{}, err
	}
	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	return cfg, cfg.validateScenario()
}

func applyProfile(cfg *Config, given map[string]bool) error {
	p, ok := profiles[cfg.Profile]
	if !ok {
		return fmt.Errorf("--profile %q: want latency or throughput", cfg.Profile)
	}
	ints := []struct {
		name string
		dst  *int
		def  int
	}{
		{"publishers", &cfg.Publishers, p.publishers}, {"subscribers", &cfg.Subscribers, p.subscribers},
		{"shards", &cfg.Shards, p.shards}, {"batch", &cfg.Batch, p.batch}, {"inflight", &cfg.Inflight, p.inflight},
	}
	for _, f := range ints {
		if !given[f.name] {
			*f.dst = f.def
		}
	}
	if !given["ack"] {
		cfg.Ack = p.ack
	}
	return nil
}

// validate checks a Config; messages name the flag and what it allows.
func (c *Config) validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{c.Addr == "", "--addr is empty"},
		{c.TLS == nil, "no TLS config: pass --ca or --fingerprint"},
		{c.Tenant == "" || c.Namespace == "", "--tenant and --namespace must not be empty"},
		{strings.Contains(c.StreamPrefix, "/"), "--stream must not contain '/'"},
		{c.Streams < 1, fmt.Sprintf("--streams %d: want at least 1", c.Streams)},
		{c.Shards < 1 || c.Shards > 1024, fmt.Sprintf("--shards %d: want 1 to 1024", c.Shards)},
		{c.Publishers < 1 || c.Publishers > maxPublishers, fmt.Sprintf("--publishers %d: want 1 to %d", c.Publishers, maxPublishers)},
		{c.Streams > c.Publishers, fmt.Sprintf("--streams %d > --publishers %d would leave streams without a publisher", c.Streams, c.Publishers)},
		{c.Subscribers < 0, fmt.Sprintf("--subscribers %d: want 0 or more", c.Subscribers)},
		{c.Payload < 0, "--payload must not be negative"},
		{c.Batch < 1, fmt.Sprintf("--batch %d: want at least 1", c.Batch)},
		{int64(c.Payload+4)*int64(c.Batch)+frameOverhead > frameLimit,
			fmt.Sprintf("--payload %d × --batch %d does not fit the broker's 16MiB frame limit", c.Payload, c.Batch)},
		{c.Ack != "none" && c.Ack != "each" && c.Ack != "batch", fmt.Sprintf("--ack %q: want none, each or batch", c.Ack)},
		{c.Ack == "each" && c.Batch != 1, fmt.Sprintf("--ack each acks every message, so --batch must be 1 (got %d); use --ack batch for one ack per batch", c.Batch)},
		{c.Inflight < 1, fmt.Sprintf("--inflight %d: want at least 1", c.Inflight)},
		{c.Floor && c.Ack == "none", "--floor compares acked publishes: not with --ack none"},
		{c.Idempotent && c.Ack != "none" && c.Inflight > 64, fmt.Sprintf("--inflight %d: an idempotent producer keeps at most 64 batches in flight (--idempotent=false for more)", c.Inflight)},
		{c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0), "--rate must be 0 (unpaced) or a positive msg/s"},
		{c.Duration < 0, "--duration must be positive"},
		{c.Count < 0, "--count must be positive"},
		{c.Duration == 0 && c.Count == 0, "--duration or --count must be positive"},
		{c.Warmup < 0, "--warmup must not be negative"},
		{c.Repeat < 1, fmt.Sprintf("--repeat %d: want at least 1", c.Repeat)},
		{c.Slow < 0 || c.Slow > c.Subscribers, fmt.Sprintf("--slow %d: want 0 to --subscribers (%d)", c.Slow, c.Subscribers)},
		{c.Slow > 0 && c.SlowDelay <= 0, "--slow-delay must be positive"},
		{c.Pause < 0 || c.Slow+c.Pause > c.Subscribers, fmt.Sprintf("--pause %d: want 0 to --subscribers minus --slow (%d)", c.Pause, c.Subscribers-c.Slow)},
		{c.Pause > 0 && (c.PauseAt < 0 || c.PauseFor <= 0), "--pause-at must not be negative and --pause-for must be positive"},
		{c.SlowWindow != 0 && c.SlowWindow < minWindow, "--slow-window must be 0 or at least 64KiB"},
		{c.StreamWindow < minWindow || c.ConnWindow < minWindow, "--stream-window and --conn-window must be at least 64KiB"},
		{c.Retries < 0, "--retries must not be negative"},
		{c.DrainTimeout <= 0 || c.DialTimeout <= 0, "--drain-timeout and --timeout must be positive"},
		{!c.Durable && c.Fsync != "", fmt.Sprintf("--fsync %s applies to durable streams: add --durable", c.Fsync)},
		{c.Durable && c.Fsync != "on_commit" && c.Fsync != "periodic" && c.Fsync != "never",
			fmt.Sprintf("--fsync %q: want on_commit, periodic or never", c.Fsync)},
	}
	for _, ch := range checks {
		if ch.bad {
			return errors.New(ch.msg)
		}
	}
	return nil
}

// streamNames returns the names of the configured streams.
func (c *Config) streamNames() []string {
	prefix := c.StreamPrefix
	if prefix == "" {
		mode := "ephemeral"
		if c.Durable {
			mode = c.Fsync
		}
		prefix = fmt.Sprintf("loadgen-%ds-%s", c.Shards, mode)
	}
	if c.Streams == 1 {
		return []string{prefix}
	}
	names := make([]string, c.Streams)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return names
}
