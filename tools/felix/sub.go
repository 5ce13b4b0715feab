package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

const subUsage = `usage: felix sub [flags] [--count N] [--from latest|earliest|OFFSET | --from-time RFC3339] [--shard S]
Prints one line per event, "OFFSET PAYLOAD" (PAYLOAD as text, or 0x + hex when
it is not printable UTF-8; an event with headers prints them between the two
as [k=v ...]), and "GAP dropped=N" on stderr when the broker
dropped events for this subscriber (an ephemeral stream's slow subscriber; a
durable stream's subscriber catches up from the log instead). --count N stops
once N events have arrived or been reported lost. --from-time starts at the
first event appended at or after the time (durable streams; "now" when none
is that recent yet). A cluster broker that does
not own the shard answers not_owner naming its owner; felix sub then
subscribes there.

Exit status: 0 when every event counted arrived (or on SIGINT/SIGTERM with
nothing lost), 1 on an error, 2 on bad arguments, 3 when the broker reported
events lost (the total is on stderr).`

// runSub is `felix sub`; SIGINT and SIGTERM end it cleanly (exit 0).
func runSub(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return sub(ctx, args, stdout, stderr)
}

type subFlags struct {
	conn  *connFlags
	count int
	from  client.From
	shard uint32
}

func parseSubFlags(args []string, stderr io.Writer) (*subFlags, error) {
	set := flag.NewFlagSet("felix sub", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, subUsage); set.PrintDefaults() }
	f := &subFlags{conn: addConnFlags(set)}
	set.IntVar(&f.count, "count", 0, "exit after `N` events (0: until interrupted)")
	from := set.String("from", "latest", "where to start: latest, earliest or an `OFFSET`")
	fromTime := set.String("from-time", "", "start at the first event appended at or after `RFC3339` (e.g. 2026-01-01T10:00:00Z)")
	shard := set.Uint("shard", 0, "shard `S` of the stream to follow")
	if err := set.Parse(args); err != nil {
		return nil, err
	}
	if err := f.conn.check(set); err != nil {
		return nil, err
	}
	if set.NArg() != 0 {
		return nil, fmt.Errorf("unexpected argument %q", set.Arg(0))
	}
	if f.count < 0 || *shard > 1<<32-1 {
		return nil, errors.New("--count must be at least 0 and --shard fit 32 bits")
	}
	f.shard = uint32(*shard)
	if *fromTime != "" {
		explicit := false
		set.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "from" })
		t, err := time.Parse(time.RFC3339Nano, *fromTime)
		switch {
		case explicit:
			return nil, errors.New("--from and --from-time exclude each other")
		case err != nil:
			return nil, fmt.Errorf("--from-time %q: want RFC 3339, e.g. 2026-01-01T10:00:00Z", *fromTime)
		}
		f.from = client.At(t)
		return f, nil
	}
	switch *from {
	case "latest":
		f.from = client.Latest()
	case "earliest":
		f.from = client.Earliest()
	default:
		n, err := strconv.ParseUint(*from, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--from %q: want latest, earliest or an offset", *from)
		}
		f.from = client.Offset(n)
	}
	return f, nil
}

// sub follows one shard until --count events, an error, or ctx ends (an
// interrupt, which is a clean exit).
func sub(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseSubFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "felix sub: %v\n%s\n", err, subUsage)
		}
		return exitUsage
	}
	c, s, err := subscribeOwner(ctx, f, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "felix sub: %v\n", err)
		return exitFail
	}
	defer c.Close()
	defer s.Close()
	return follow(ctx, s, uint64(f.count), stdout, stderr)
}

// subscribeOwner subscribes at --addr; a broker of a cluster that does not
// own the shard answers not_owner naming its owner, and the subscription
// is opened there instead (once: an owner that refuses again is an error).
func subscribeOwner(ctx context.Context, f *subFlags, stderr io.Writer) (*client.Client, *client.Subscription, error) {
	for redirected := false; ; redirected = true {
		c, err := f.conn.dial(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, f.conn.timeout)
		s, err := c.Subscribe(sctx, f.conn.namespace, f.conn.stream, client.SubscribeOptions{Shard: f.shard, From: f.from})
		cancel()
		if err == nil {
			return c, s, nil
		}
		c.Close()
		var be *client.BrokerError
		if redirected || !errors.As(err, &be) || !errors.Is(err, client.ErrNotOwner) || be.Owner == nil || be.Owner.Addr == "" {
			return nil, nil, err
		}
		fmt.Fprintf(stderr, "felix sub: shard %d is owned by %s (%s); subscribing there\n", f.shard, be.Owner.ID, be.Owner.Addr)
		f.conn.addr = be.Owner.Addr
	}
}

// follow prints events until count of them have arrived or been reported
// lost (0: until ctx ends), and says on stderr how many were lost.
func follow(ctx context.Context, s *client.Subscription, count uint64, stdout, stderr io.Writer) int {
	var got, lost uint64
	code := printEvents(ctx, s, count, stdout, stderr, &got, &lost)
	if lost != 0 {
		fmt.Fprintf(stderr, "felix sub: %d event(s) lost (reported by the broker), %d received\n", lost, got)
		if code == exitOK {
			code = exitLost
		}
	}
	return code
}

// printEvents is follow's loop, counting what arrived and what was lost.
func printEvents(ctx context.Context, s *client.Subscription, count uint64, stdout, stderr io.Writer, got, lost *uint64) int {
	for count == 0 || *got+*lost < count {
		ev, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			fmt.Fprintf(stderr, "felix sub: %v\n", err)
			return exitFail
		}
		if ev.Dropped != 0 {
			fmt.Fprintf(stderr, "GAP dropped=%d\n", ev.Dropped)
			*lost += ev.Dropped
			continue
		}
		offset := "-" // only a broker without offsets leaves it out
		if ev.HasOffset {
			offset = strconv.FormatUint(ev.Offset, 10)
		}
		headers := ""
		if len(ev.Headers) > 0 {
			headers = "[" + wire.FormatHeaders(ev.Headers) + "] "
		}
		if _, err := fmt.Fprintf(stdout, "%s %s%s\n", offset, headers, printable(ev.Payload)); err != nil {
			return exitFail // stdout is gone
		}
		*got++
	}
	return exitOK
}

// printable is payload as text when it is valid UTF-8 without control
// characters (so one event stays one line), else 0x and its hex.
func printable(payload []byte) string {
	if utf8.Valid(payload) {
		ok := true
		for _, r := range string(payload) {
			if unicode.IsControl(r) {
				ok = false
				break
			}
		}
		if ok {
			return string(payload)
		}
	}
	return "0x" + hex.EncodeToString(payload)
}
