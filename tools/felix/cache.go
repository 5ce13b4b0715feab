package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/wire"
)

const cacheUsage = `usage: felix cache put KEY VALUE [--cache C] [--ttl 5m] [--if-version N | --if-absent]
       felix cache get KEY [--cache C] [--version]  prints the value (after its version); exit 1 when absent
       felix cache del KEY [--cache C]     prints "deleted", or "absent" (then nothing changed)
       felix counter add KEY DELTA [--cache C]   prints the new value
       felix counter get KEY [--cache C]         prints the value (absent = 0)
A conditional put (--if-version N: only over version N; --if-absent: only
where the key has no live value) prints "applied VERSION", or "refused
VERSION" ("refused absent") and exits 1 when the key did not meet it.
--json prints one JSON object instead: {"key":K,"value":V} (get, counter;
"version":N with --version), {"key":K,"found":false} (get of an absent key),
{"key":K,"existed":B} (del), {"key":K,"ok":true} (put),
{"key":K,"applied":B,"version":N} (conditional put; null when absent).
The cache defaults to demo.`

const watchUsage = `usage: felix watch KEY [--cache C] [--current] [--count N] [--json]
Prints one line per change of KEY: "REVISION put VALUE", "REVISION counter
VALUE", "REVISION delete" (a delete, or an eviction of the least recently
used); "GAP dropped=N" on stderr when the broker dropped changes for this
watcher. Revisions grow with every change of the cache.

--current prints the key's state first: "REVISION put VALUE" (the revision
of the change that made it) or, for an absent key, "REVISION absent" (the
cache's latest revision, 0 before its first change). Deleting an absent key
changes nothing, so it is not printed. --json prints
{"revision":R,"op":"put","key":K,"value":V,"current":true} per line.`

// cacheFlags are the flags of the cache, counter and watch commands.
type cacheFlags struct {
	conn    *connFlags
	cache   string
	ttl     time.Duration
	current bool
	count   int
	json    bool
	// cache put's condition and cache get's --version.
	ifVersion   string
	ifAbsent    bool
	withVersion bool
}

// condition is cache put's condition, nil for an unconditional put.
func (f *cacheFlags) condition() (*client.Condition, error) {
	switch {
	case f.ifVersion != "" && f.ifAbsent:
		return nil, errors.New("--if-version and --if-absent exclude each other")
	case f.ifAbsent:
		return &client.IfAbsent, nil
	case f.ifVersion != "":
		v, err := strconv.ParseUint(f.ifVersion, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--if-version %q is not a version", f.ifVersion)
		}
		c := client.IfVersion(v)
		return &c, nil
	}
	return nil, nil
}

// newCacheFlags is the flag set of op ("cache put", "counter get", "watch").
func newCacheFlags(op string) (*flag.FlagSet, *cacheFlags) {
	set := flag.NewFlagSet("felix "+op, flag.ContinueOnError)
	f := &cacheFlags{conn: addConnFlags(set)}
	set.StringVar(&f.cache, "cache", "demo", "cache `C`")
	set.BoolVar(&f.json, "json", false, "print JSON (see above)")
	switch op {
	case "cache put":
		set.DurationVar(&f.ttl, "ttl", 0, "expire the value after `D` (5s, 10m, 2h; 0: never)")
		set.StringVar(&f.ifVersion, "if-version", "", "put only if the key's live value has version `N`")
		set.BoolVar(&f.ifAbsent, "if-absent", false, "put only if the key has no live value")
	case "cache get":
		set.BoolVar(&f.withVersion, "version", false, "print the value's version before it")
	case "watch":
		set.BoolVar(&f.current, "current", false, "print the key's current state first")
		set.IntVar(&f.count, "count", 0, "exit after `N` changes (0: until interrupted)")
	}
	return set, f
}

// cacheFlagSet is newCacheFlags for shell completion.
func cacheFlagSet(op string) func() *flag.FlagSet {
	return func() *flag.FlagSet { s, _ := newCacheFlags(op); return s }
}

// runCache is `felix cache put|get|del`.
func runCache(args []string, stdout, stderr io.Writer) int {
	return cacheCmd(context.Background(), "cache", args, stdout, stderr)
}

// runCounter is `felix counter add|get`.
func runCounter(args []string, stdout, stderr io.Writer) int {
	return cacheCmd(context.Background(), "counter", args, stdout, stderr)
}

// cacheArgs is how many arguments each operation takes.
var cacheArgs = map[string]int{"cache put": 2, "cache get": 1, "cache del": 1, "counter add": 2, "counter get": 1}

func cacheCmd(ctx context.Context, group string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		cli.PrintUsage(stderr, cacheUsage, nil)
		return exitUsage
	}
	if cli.IsHelp(args[0]) {
		return cli.Fail(cli.ErrHelp, "felix "+group, cacheUsage, nil, stdout, stderr)
	}
	op := group + " " + args[0]
	want, ok := cacheArgs[op]
	if !ok {
		return cli.Fail(fmt.Errorf("unknown operation %q", args[0]), "felix "+group, cacheUsage, nil, stdout, stderr)
	}
	set, f := newCacheFlags(op)
	pos, err := cli.Parse(set, args[1:])
	if err == nil {
		err = f.conn.check(set)
	}
	if err == nil && len(pos) != want {
		err = fmt.Errorf("want %d argument(s), got %d", want, len(pos))
	}
	if err == nil && f.ttl < 0 {
		err = errors.New("--ttl must not be negative")
	}
	a := cacheArgsOf{ttl: f.ttl, version: f.withVersion}
	if err == nil && op == "counter add" {
		if a.delta, err = strconv.ParseInt(pos[1], 10, 64); err != nil {
			err = fmt.Errorf("DELTA %q is not an integer", pos[1])
		}
	}
	if err == nil {
		a.cond, err = f.condition()
	}
	if err != nil {
		return cli.Fail(err, "felix "+op, cacheUsage, set, stdout, stderr)
	}
	c, err := f.conn.dial(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "felix %s: %v\n", op, err)
		return exitFail
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	defer cancel()
	k, err := c.OpenCache(ctx, f.conn.namespace, f.cache)
	if err == nil {
		defer k.Close(ctx)
		err = cacheOp(ctx, k, op, pos, f.json, a, stdout)
	}
	if errors.Is(err, errRefused) {
		return exitFail
	}
	if errors.Is(err, errAbsent) {
		if f.json {
			writeJSONLine(stdout, map[string]any{"key": pos[0], "found": false})
		}
		fmt.Fprintf(stderr, "felix %s: %v\n", op, err)
		return exitFail
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix %s: %v\n", op, err)
		return exitFail
	}
	return exitOK
}

// errAbsent makes `felix cache get` exit 1 for a missing key; errRefused
// does for a conditional put whose condition did not hold (said on stdout).
var (
	errAbsent  = errors.New("not found")
	errRefused = errors.New("refused")
)

// cacheArgsOf are an operation's flag values.
type cacheArgsOf struct {
	ttl     time.Duration
	delta   int64
	cond    *client.Condition
	version bool
}

func cacheOp(ctx context.Context, k *client.Cache, op string, pos []string, asJSON bool, a cacheArgsOf, stdout io.Writer) error {
	key := pos[0]
	// out prints the text line, or the JSON object with the key.
	out := func(text string, obj map[string]any) error {
		if asJSON {
			obj["key"] = key
			return writeJSONLine(stdout, obj)
		}
		if text == "" {
			return nil
		}
		_, err := fmt.Fprintln(stdout, text)
		return err
	}
	switch op {
	case "cache put":
		if a.cond != nil {
			return conditionalPut(ctx, k, key, []byte(pos[1]), a, out)
		}
		if err := k.Put(ctx, key, []byte(pos[1]), a.ttl); err != nil {
			return err
		}
		return out("", map[string]any{"ok": true})
	case "cache get":
		v, version, found, err := getMaybeVersion(ctx, k, key, a.version)
		if err == nil && !found {
			return fmt.Errorf("key %q: %w", key, errAbsent)
		}
		if err != nil {
			return err
		}
		if a.version {
			return out(strconv.FormatUint(version, 10)+" "+printable(v), payloadFields(map[string]any{"version": version}, "value", v))
		}
		return out(printable(v), payloadFields(map[string]any{}, "value", v))
	case "cache del":
		existed, err := k.Delete(ctx, key)
		if err != nil {
			return err
		}
		return out(map[bool]string{true: "deleted", false: "absent"}[existed], map[string]any{"existed": existed})
	case "counter add", "counter get":
		var n int64
		var err error
		if op == "counter add" {
			n, err = k.CounterAdd(ctx, key, a.delta)
		} else {
			n, err = k.CounterGet(ctx, key)
		}
		if err != nil {
			return err
		}
		return out(strconv.FormatInt(n, 10), map[string]any{"value": n})
	}
	return fmt.Errorf("unknown operation %s", op)
}

func getMaybeVersion(ctx context.Context, k *client.Cache, key string, version bool) ([]byte, uint64, bool, error) {
	if version {
		return k.GetVersion(ctx, key)
	}
	v, found, err := k.Get(ctx, key)
	return v, 0, found, err
}

// conditionalPut prints "applied VERSION" or "refused VERSION|absent"
// (errRefused) through out.
func conditionalPut(ctx context.Context, k *client.Cache, key string, value []byte, a cacheArgsOf,
	out func(string, map[string]any) error) error {
	applied, version, found, err := k.PutIf(ctx, key, value, a.ttl, *a.cond)
	if err != nil {
		return err
	}
	v, jv := "absent", any(nil)
	if found {
		v, jv = strconv.FormatUint(version, 10), version
	}
	word := map[bool]string{true: "applied", false: "refused"}[applied]
	if err := out(word+" "+v, map[string]any{"applied": applied, "version": jv}); err != nil {
		return err
	}
	if !applied {
		return errRefused
	}
	return nil
}

// runWatch is `felix watch`; SIGINT and SIGTERM end it cleanly (exit 0).
func runWatch(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return watch(ctx, args, stdout, stderr)
}

func watch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	set, f := newCacheFlags("watch")
	pos, err := cli.Parse(set, args)
	if err == nil {
		err = f.conn.check(set)
	}
	if err == nil && (len(pos) != 1 || f.count < 0) {
		err = errors.New("want one KEY, and --count at least 0")
	}
	if err != nil {
		return cli.Fail(err, "felix watch", watchUsage, set, stdout, stderr)
	}
	c, err := f.conn.dial(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "felix watch: %v\n", err)
		return exitFail
	}
	defer c.Close()
	wctx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	w, err := c.Watch(wctx, f.conn.namespace, f.cache, pos[0], client.WatchOptions{Current: f.current})
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "felix watch: %v\n", err)
		return exitFail
	}
	defer w.Close()
	for n := 0; f.count == 0 || n < f.count; {
		ev, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			fmt.Fprintf(stderr, "felix watch: %v\n", err)
			return exitFail
		}
		if ev.Dropped != 0 {
			fmt.Fprintf(stderr, "GAP dropped=%d\n", ev.Dropped)
			continue
		}
		if err := printChange(stdout, ev, f.json); err != nil {
			return exitFail
		}
		n++
	}
	return exitOK
}

// printChange prints one watch event as text or JSON.
func printChange(w io.Writer, ev client.WatchEvent, asJSON bool) error {
	op := ev.Op.String()
	if ev.Current && ev.Op == wire.CacheOpDelete {
		op = "absent"
	}
	if asJSON {
		obj := map[string]any{"revision": ev.Revision, "op": op, "key": ev.Key}
		if ev.Current {
			obj["current"] = true
		}
		if ev.Op != wire.CacheOpDelete {
			payloadFields(obj, "value", ev.Value)
		}
		if !ev.ExpiresAt.IsZero() {
			obj["expires_at"] = ev.ExpiresAt.UTC().Format(time.RFC3339Nano)
		}
		return writeJSONLine(w, obj)
	}
	line := fmt.Sprintf("%d %s", ev.Revision, op)
	if ev.Op != wire.CacheOpDelete {
		line += " " + printable(ev.Value)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
