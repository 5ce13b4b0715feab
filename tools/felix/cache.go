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
	"strings"
	"syscall"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

const cacheUsage = `usage: felix cache put --cache C KEY VALUE [--ttl 5s] [--if-version N | --if-absent]
       felix cache get --cache C KEY [--version]  prints the value (after its version); exit 1 when absent
       felix cache del --cache C KEY     prints "deleted" or "absent"
       felix counter add --cache C KEY DELTA   prints the new value
       felix counter get --cache C KEY         prints the value (absent = 0)
A conditional put (--if-version N: only over version N; --if-absent: only
where the key has no live value) prints "applied VERSION", or "refused
VERSION" ("refused absent") and exits 1 when the key did not meet it.
Flags may come before or after the arguments; --addr --tenant --namespace
--ca --fingerprint --token --timeout as for felix pub.`

const watchUsage = `usage: felix watch --cache C KEY [--current] [--count N]
Prints one line per change of KEY: "REVISION put VALUE", "REVISION counter
VALUE", "REVISION delete"; "GAP dropped=N" on stderr when the broker dropped
changes for this watcher. --current prints the key's current state first.`

// cacheFlags are the flags of the cache, counter and watch commands.
type cacheFlags struct {
	conn    *connFlags
	cache   string
	ttl     time.Duration
	current bool
	count   int
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

func newCacheFlagSet(name, usage string, stderr io.Writer) (*flag.FlagSet, *cacheFlags) {
	set := flag.NewFlagSet(name, flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, usage); set.PrintDefaults() }
	f := &cacheFlags{conn: addConnFlags(set)}
	set.StringVar(&f.cache, "cache", "demo", "cache `C`")
	return set, f
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments (`felix cache put KEY VALUE --ttl 5s`), which the
// flag package alone stops at. A token that parses as a negative integer is
// an argument (a counter DELTA), not a flag; "--" ends the flags.
func parseInterleaved(set *flag.FlagSet, args []string) ([]string, error) {
	var pos, flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if _, err := strconv.ParseInt(a, 10, 64); err == nil || !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if fl := set.Lookup(name); fl != nil && !isBoolFlag(fl) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := set.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

func isBoolFlag(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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
		fmt.Fprintln(stderr, cacheUsage)
		return exitUsage
	}
	op := group + " " + args[0]
	want, ok := cacheArgs[op]
	if !ok {
		fmt.Fprintf(stderr, "felix %s: unknown operation %q\n%s\n", group, args[0], cacheUsage)
		return exitUsage
	}
	set, f := newCacheFlagSet("felix "+op, cacheUsage, stderr)
	switch op {
	case "cache put":
		set.DurationVar(&f.ttl, "ttl", 0, "expire the value after `D` (0: never)")
		set.StringVar(&f.ifVersion, "if-version", "", "put only if the key's live value has version `N`")
		set.BoolVar(&f.ifAbsent, "if-absent", false, "put only if the key has no live value")
	case "cache get":
		set.BoolVar(&f.withVersion, "version", false, "print the value's version before it")
	}
	pos, err := parseInterleaved(set, args[1:])
	if err == nil {
		err = f.conn.check(set)
	}
	if err == nil && len(pos) != want {
		err = fmt.Errorf("want %d argument(s), got %d", want, len(pos))
	}
	if err == nil && f.ttl < 0 {
		err = errors.New("--ttl must not be negative")
	}
	var cond *client.Condition
	if err == nil {
		cond, err = f.condition()
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "felix %s: %v\n%s\n", op, err, cacheUsage)
		}
		return exitUsage
	}
	var delta int64
	if op == "counter add" {
		if delta, err = strconv.ParseInt(pos[1], 10, 64); err != nil {
			fmt.Fprintf(stderr, "felix %s: DELTA %q is not an integer\n%s\n", op, pos[1], cacheUsage)
			return exitUsage
		}
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
		err = cacheOp(ctx, k, op, pos, cacheArgsOf{ttl: f.ttl, delta: delta, cond: cond, version: f.withVersion}, stdout)
	}
	if errors.Is(err, errRefused) {
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

func cacheOp(ctx context.Context, k *client.Cache, op string, pos []string, a cacheArgsOf, stdout io.Writer) error {
	key := pos[0]
	switch op {
	case "cache put":
		if a.cond == nil {
			return k.Put(ctx, key, []byte(pos[1]), a.ttl)
		}
		return conditionalPut(ctx, k, key, []byte(pos[1]), a, stdout)
	case "cache get":
		v, version, found, err := getMaybeVersion(ctx, k, key, a.version)
		if err == nil && !found {
			return fmt.Errorf("key %q: %w", key, errAbsent)
		}
		if err == nil && a.version {
			_, err = fmt.Fprintf(stdout, "%d %s\n", version, printable(v))
		} else if err == nil {
			_, err = fmt.Fprintln(stdout, printable(v))
		}
		return err
	case "cache del":
		existed, err := k.Delete(ctx, key)
		if err == nil {
			_, err = fmt.Fprintln(stdout, map[bool]string{true: "deleted", false: "absent"}[existed])
		}
		return err
	case "counter add", "counter get":
		var n int64
		var err error
		if op == "counter add" {
			n, err = k.CounterAdd(ctx, key, a.delta)
		} else {
			n, err = k.CounterGet(ctx, key)
		}
		if err == nil {
			_, err = fmt.Fprintln(stdout, n)
		}
		return err
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

// conditionalPut prints "applied VERSION" or "refused VERSION|absent".
func conditionalPut(ctx context.Context, k *client.Cache, key string, value []byte, a cacheArgsOf, stdout io.Writer) error {
	applied, version, found, err := k.PutIf(ctx, key, value, a.ttl, *a.cond)
	if err != nil {
		return err
	}
	v := "absent"
	if found {
		v = strconv.FormatUint(version, 10)
	}
	if applied {
		_, err = fmt.Fprintln(stdout, "applied", v)
		return err
	}
	if _, err := fmt.Fprintln(stdout, "refused", v); err != nil {
		return err
	}
	return errRefused
}

// runWatch is `felix watch`; SIGINT and SIGTERM end it cleanly (exit 0).
func runWatch(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return watch(ctx, args, stdout, stderr)
}

func watch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	set, f := newCacheFlagSet("felix watch", watchUsage, stderr)
	set.BoolVar(&f.current, "current", false, "print the key's current state first")
	set.IntVar(&f.count, "count", 0, "exit after `N` changes (0: until interrupted)")
	pos, err := parseInterleaved(set, args)
	if err == nil {
		err = f.conn.check(set)
	}
	if err == nil && (len(pos) != 1 || f.count < 0) {
		err = errors.New("want one KEY, and --count at least 0")
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "felix watch: %v\n%s\n", err, watchUsage)
		}
		return exitUsage
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
		line := fmt.Sprintf("%d %s", ev.Revision, ev.Op)
		if ev.Op != wire.CacheOpDelete {
			line += " " + printable(ev.Value)
		}
		if _, err := fmt.Fprintln(stdout, line); err != nil {
			return exitFail
		}
		n++
	}
	return exitOK
}
