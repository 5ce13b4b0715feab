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
	"sync"
	"syscall"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/wire"
)

const subUsage = `usage: felix sub [--count N] [--from latest|earliest|OFFSET | --from-time RFC3339] [--shard S] [--json]
Follows every shard of the stream (or --shard S only) and prints one line per
event, "SHARD OFFSET PAYLOAD" (PAYLOAD as text, or 0x + hex when it is not
printable UTF-8; an event with headers prints them before it as
[k=v ...]); order holds within a shard. "GAP shard=S dropped=N" goes to
stderr when the broker dropped events for this subscriber (an ephemeral
stream's slow subscriber; a durable stream's subscriber catches up from the
log instead). --count N stops once N events have arrived or been reported
lost, over all shards. Once subscribed it says so on stderr.

--from earliest starts at the oldest event each shard still holds: the whole
retained log of a durable stream, but on an ephemeral stream only what its
memory ring keeps (the last FELIX_STREAM_RING_EVENTS events, 1,024 by
default). An OFFSET is per shard: give --shard with it on a stream of
several shards. --from-time starts each shard at its first event appended at
or after the time (durable streams; at the live tail when none is that
recent yet).

A cluster broker that does not own a shard answers not_owner naming its
owner; felix sub then subscribes there.

--json prints {"shard":S,"offset":O,"payload":"..."} per event ("payload_base64"
when it is not UTF-8; "headers":[{"key":K,"value":V},...] when it has any)
and {"shard":S,"dropped":N} per gap, on stdout.

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
	conn     *connFlags
	count    int
	from     string
	fromTime string
	shard    int64 // -1: every shard
	json     bool
}

func newSubFlags() (*flag.FlagSet, *subFlags) {
	set := flag.NewFlagSet("felix sub", flag.ContinueOnError)
	f := &subFlags{conn: addConnFlags(set)}
	set.IntVar(&f.count, "count", 0, "exit after `N` events over all shards (0: until interrupted)")
	set.StringVar(&f.from, "from", "latest", "where to start: latest, earliest (an ephemeral stream: its ring, see above) or an `OFFSET`")
	set.StringVar(&f.fromTime, "from-time", "", "start at the first event appended at or after `RFC3339` (e.g. 2026-01-01T10:00:00Z)")
	set.Int64Var(&f.shard, "shard", -1, "follow shard `S` only (default: every shard)")
	set.BoolVar(&f.json, "json", false, "print JSON lines on stdout (see above)")
	return set, f
}

// start is --from or --from-time as a client.From; isOffset: --from OFFSET.
func (f *subFlags) start(set *flag.FlagSet) (from client.From, isOffset bool, err error) {
	if f.fromTime != "" {
		explicit := false
		set.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "from" })
		t, err := time.Parse(time.RFC3339Nano, f.fromTime)
		switch {
		case explicit:
			return client.From{}, false, errors.New("--from and --from-time exclude each other")
		case err != nil:
			return client.From{}, false, fmt.Errorf("--from-time %q: want RFC 3339, e.g. 2026-01-01T10:00:00Z", f.fromTime)
		}
		return client.At(t), false, nil
	}
	switch f.from {
	case "latest":
		return client.Latest(), false, nil
	case "earliest":
		return client.Earliest(), false, nil
	}
	n, err := strconv.ParseUint(f.from, 10, 64)
	if err != nil {
		return client.From{}, false, fmt.Errorf("--from %q: want latest, earliest or an offset", f.from)
	}
	return client.Offset(n), true, nil
}

// sub follows the stream until --count events, an error, or ctx ends (an
// interrupt, which is a clean exit).
func sub(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	set, f := newSubFlags()
	pos, err := cli.Parse(set, args)
	if err == nil {
		err = f.conn.check(set)
	}
	if err == nil && len(pos) != 0 {
		err = fmt.Errorf("unexpected argument %q", pos[0])
	}
	if err == nil && (f.count < 0 || f.shard < -1 || f.shard > 1<<32-1) {
		err = errors.New("--count must be at least 0 and --shard a shard number")
	}
	from, isOffset, ferr := f.start(set)
	if err == nil {
		err = ferr
	}
	if err != nil {
		return cli.Fail(err, "felix sub", subUsage, set, stdout, stderr)
	}
	shards, err := f.shards(ctx, isOffset)
	if errors.Is(err, errOffsetNeedsShard) {
		return cli.Fail(err, "felix sub", subUsage, set, stdout, stderr)
	}
	var subs []*shardSub
	for _, sh := range shards {
		if err == nil {
			var s *shardSub
			s, err = f.subscribeOwner(ctx, sh, from, stderr)
			subs = append(subs, s)
		}
	}
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.close()
			}
		}
	}()
	if err != nil {
		fmt.Fprintf(stderr, "felix sub: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stderr, "felix sub: following %s/%s/%s %s from %s\n", f.conn.tenant, f.conn.namespace, f.conn.stream, shardList(shards), f.startName())
	return follow(ctx, subs, uint64(f.count), f.json, stdout, stderr)
}

// startName is where the subscription starts, as the flags said it.
func (f *subFlags) startName() string {
	if f.fromTime != "" {
		return f.fromTime
	}
	return f.from
}

var errOffsetNeedsShard = errors.New("an OFFSET is per shard: give --shard with --from OFFSET on a stream of several shards")

// shards are the shards to follow: --shard, else every shard the broker
// says the stream has.
func (f *subFlags) shards(ctx context.Context, isOffset bool) ([]uint32, error) {
	if f.shard >= 0 {
		return []uint32{uint32(f.shard)}, nil
	}
	c, err := f.conn.dial(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	defer cancel()
	info, err := c.StreamShards(sctx, f.conn.namespace, f.conn.stream)
	if errors.Is(err, client.ErrNotNegotiated) {
		return []uint32{0}, nil // a broker that cannot say: its shard 0, as before
	}
	if err != nil {
		return nil, err
	}
	if isOffset && info.Shards > 1 {
		return nil, errOffsetNeedsShard
	}
	out := make([]uint32, max(info.Shards, 1))
	for i := range out {
		out[i] = uint32(i)
	}
	return out, nil
}

func shardList(shards []uint32) string {
	switch {
	case len(shards) == 1:
		return fmt.Sprintf("shard %d", shards[0])
	case len(shards) == int(shards[len(shards)-1])+1:
		return fmt.Sprintf("shards 0-%d", len(shards)-1)
	}
	return fmt.Sprintf("shards %v", shards)
}

// shardSub is the subscription of one shard on its own connection (shards
// of a cluster may have different owners).
type shardSub struct {
	shard uint32
	c     *client.Client
	s     *client.Subscription
}

func (s *shardSub) close() {
	s.s.Close()
	s.c.Close()
}

// subscribeOwner subscribes to shard at --addr; a broker of a cluster that
// does not own the shard answers not_owner naming its owner, and the
// subscription is opened there instead (once: an owner that refuses again
// is an error).
func (f *subFlags) subscribeOwner(ctx context.Context, shard uint32, from client.From, stderr io.Writer) (*shardSub, error) {
	conn := *f.conn
	for redirected := false; ; redirected = true {
		c, err := conn.dial(ctx, nil)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, conn.timeout)
		s, err := c.Subscribe(sctx, conn.namespace, conn.stream, client.SubscribeOptions{Shard: shard, From: from})
		cancel()
		if err == nil {
			return &shardSub{shard: shard, c: c, s: s}, nil
		}
		c.Close()
		var be *client.BrokerError
		if redirected || !errors.As(err, &be) || !errors.Is(err, client.ErrNotOwner) || be.Owner == nil || be.Owner.Addr == "" {
			return nil, err
		}
		fmt.Fprintf(stderr, "felix sub: shard %d is owned by %s (%s); subscribing there\n", shard, be.Owner.ID, be.Owner.Addr)
		conn.addr = be.Owner.Addr
	}
}

// shardEvent is one event or gap of one shard, or the error that ended it.
type shardEvent struct {
	shard uint32
	ev    client.Event
	err   error
}

// follow prints events of every subscription until count of them have
// arrived or been reported lost (0: until ctx ends), and says on stderr how
// many were lost.
func follow(ctx context.Context, subs []*shardSub, count uint64, asJSON bool, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(ctx)
	events := make(chan shardEvent)
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := s.s.Next(ctx)
				select {
				case events <- shardEvent{s.shard, ev, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	var got, lost uint64
	code := printEvents(ctx, events, count, asJSON, stdout, stderr, &got, &lost)
	if lost != 0 {
		fmt.Fprintf(stderr, "felix sub: %d event(s) lost (reported by the broker), %d received\n", lost, got)
		if code == exitOK {
			code = exitLost
		}
	}
	return code
}

// printEvents is follow's loop, counting what arrived and what was lost.
func printEvents(ctx context.Context, events <-chan shardEvent, count uint64, asJSON bool, stdout, stderr io.Writer, got, lost *uint64) int {
	for count == 0 || *got+*lost < count {
		var se shardEvent
		select {
		case se = <-events:
		case <-ctx.Done():
			return exitOK
		}
		if se.err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			fmt.Fprintf(stderr, "felix sub: shard %d: %v\n", se.shard, se.err)
			return exitFail
		}
		ev := se.ev
		var err error
		switch {
		case ev.Dropped != 0 && asJSON:
			err = writeJSONLine(stdout, map[string]any{"shard": se.shard, "dropped": ev.Dropped})
		case ev.Dropped != 0:
			fmt.Fprintf(stderr, "GAP shard=%d dropped=%d\n", se.shard, ev.Dropped)
		case asJSON:
			obj := map[string]any{"shard": se.shard, "offset": nil}
			if ev.HasOffset {
				obj["offset"] = ev.Offset
			}
			if len(ev.Headers) > 0 {
				obj["headers"] = headerObjects(ev.Headers)
			}
			err = writeJSONLine(stdout, payloadFields(obj, "payload", ev.Payload))
		default:
			offset := "-" // only a broker without offsets leaves it out
			if ev.HasOffset {
				offset = strconv.FormatUint(ev.Offset, 10)
			}
			_, err = fmt.Fprintf(stdout, "%d %s %s%s\n", se.shard, offset, headerText(ev.Headers), printable(ev.Payload))
		}
		if err != nil {
			return exitFail // stdout is gone
		}
		if ev.Dropped != 0 {
			*lost += ev.Dropped
		} else {
			*got++
		}
	}
	return exitOK
}

// headerText is an event's headers as "[k=v ...] ", "" for none.
func headerText(hs []wire.EventHeader) string {
	if len(hs) == 0 {
		return ""
	}
	return "[" + wire.FormatHeaders(hs) + "] "
}

// headerObjects are an event's headers for --json, in their order.
func headerObjects(hs []wire.EventHeader) []map[string]string {
	out := make([]map[string]string, len(hs))
	for i, h := range hs {
		out[i] = map[string]string{"key": h.Key, "value": h.Value}
	}
	return out
}
