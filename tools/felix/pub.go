package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/wire"
)

const pubUsage = `usage: felix pub [MESSAGE] [--count N] [--size B] [--batch K] [--ack] [--key K | --shard S] [--header K=V]... [--json]
Publishes MESSAGE, or a B-byte payload with --size, N times, K per batch.
With neither, publishes each line of stdin as one message.

Which shard: --key K routes by the key (FNV-1a 64 with a SplitMix64 finish,
as the published Felix: one key always lands in one shard, in order);
--shard S picks one; with neither the broker picks.

--ack waits for the broker's ack of every batch and prints "SHARD OFFSET"
per batch on stdout (OFFSET is the batch's first message; a batch of K
holds OFFSET..OFFSET+K-1). Acked batches go through an idempotent producer
(unless --idempotent=false): a batch whose connection fails is sent again
under the same sequence and the broker writes it once, so every message is
in the stream exactly once. Without --ack publishes are fire-and-forget.

--header K=V (repeatable) gives every message that header; felix sub prints
them. With --key or --shard it needs the idempotent producer (--ack).

The summary goes to stderr. --json prints one JSON object per line on
stdout instead: {"shard":S,"offset":O,"count":K} per acked batch, then
{"messages":N,"bytes":B,"seconds":T}.`

// ackWindow bounds the acked publishes in flight with --ack.
const ackWindow = 256

// stdin is what `felix pub` reads without MESSAGE or --size; tests swap it.
var stdin io.Reader = os.Stdin

// runPub is `felix pub`. It does not catch signals: an interrupted publish
// has nothing left to report, and a read of stdin could not be interrupted.
func runPub(args []string, stdout, stderr io.Writer) int {
	return pub(context.Background(), args, stdin, stdout, stderr)
}

type pubFlags struct {
	conn       *connFlags
	count      int
	size       int
	batch      int
	ack        bool
	idempotent bool
	shard      int64 // -1: not given
	key        string
	headers    headerFlag
	json       bool
	given      map[string]bool
}

// headerFlag collects --header K=V.
type headerFlag []wire.EventHeader

func (h *headerFlag) String() string { return wire.FormatHeaders(*h) }

func (h *headerFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return errors.New("want KEY=VALUE")
	}
	next := append(*h, wire.EventHeader{Key: k, Value: v})
	if err := wire.CheckHeaders(next); err != nil {
		return err
	}
	*h = next
	return nil
}

// messages are a batch's payloads with the command's headers.
func (f *pubFlags) messages(batch [][]byte) []client.Message {
	msgs := make([]client.Message, len(batch))
	for i, p := range batch {
		msgs[i] = client.Message{Payload: p, Headers: f.headers}
	}
	return msgs
}

func newPubFlags() (*flag.FlagSet, *pubFlags) {
	set := flag.NewFlagSet("felix pub", flag.ContinueOnError)
	f := &pubFlags{conn: addConnFlags(set)}
	set.IntVar(&f.count, "count", 1, "publish the message `N` times")
	set.IntVar(&f.size, "size", 0, "publish a payload of `B` bytes instead of MESSAGE")
	set.IntVar(&f.batch, "batch", 1, "`K` messages per publish batch")
	set.BoolVar(&f.ack, "ack", false, "wait for the broker's ack of every batch (pipelined) and print its shard and offset")
	set.BoolVar(&f.idempotent, "idempotent", true, "with --ack: publish through an idempotent producer (exactly once, re-sent after failures)")
	set.Int64Var(&f.shard, "shard", -1, "publish to shard `S` (default: by --key, else the broker picks)")
	set.StringVar(&f.key, "key", "", "route by the key `K`: one key, one shard")
	set.Var(&f.headers, "header", "`KEY=VALUE` header on every message (repeatable)")
	set.BoolVar(&f.json, "json", false, "print JSON lines on stdout (see above)")
	return set, f
}

func parsePubFlags(args []string) (*flag.FlagSet, *pubFlags, []string, error) {
	set, f := newPubFlags()
	pos, err := cli.Parse(set, args)
	if err != nil {
		return set, nil, nil, err
	}
	f.given = map[string]bool{}
	set.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	if err := f.conn.check(set); err != nil {
		return set, nil, nil, err
	}
	switch {
	case len(pos) > 1:
		return set, nil, nil, errors.New("one MESSAGE only (quote it)")
	case len(pos) == 1 && f.given["size"]:
		return set, nil, nil, errors.New("pass MESSAGE or --size, not both")
	case len(pos) == 0 && !f.given["size"] && f.given["count"]:
		return set, nil, nil, errors.New("--count needs MESSAGE or --size (stdin publishes each line once)")
	case f.count < 1 || f.batch < 1 || f.size < 0:
		return set, nil, nil, errors.New("--count and --batch must be at least 1, --size at least 0")
	case f.given["shard"] && f.given["key"]:
		return set, nil, nil, errors.New("pass --key or --shard, not both")
	case f.given["shard"] && (f.shard < 0 || f.shard > 1<<32-1):
		return set, nil, nil, fmt.Errorf("--shard %d: want a shard number from 0", f.shard)
	case len(f.headers) > 0 && (f.given["shard"] || f.given["key"]) && !(f.ack && f.idempotent):
		return set, nil, nil, errors.New("--header with --key or --shard needs --ack (the idempotent producer)")
	}
	return set, f, pos, nil
}

// pub publishes and prints a summary; ctx bounds the whole command.
func pub(ctx context.Context, args []string, in io.Reader, stdout, stderr io.Writer) int {
	set, f, rest, err := parsePubFlags(args)
	if err != nil {
		return cli.Fail(err, "felix pub", pubUsage, set, stdout, stderr)
	}
	var next batches
	switch {
	case f.given["size"]:
		next = repeated(bytes.Repeat([]byte{'x'}, f.size), f.count, f.batch)
	case len(rest) == 1:
		next = repeated([]byte(rest[0]), f.count, f.batch)
	default:
		next = lines(in, f.batch)
	}
	c, err := f.conn.dial(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "felix pub: %v\n", err)
		return exitFail
	}
	defer c.Close()
	start := time.Now()
	out := &ackPrinter{w: stdout, json: f.json}
	var st pubStats
	if f.ack && f.idempotent {
		st, err = pubIdempotent(ctx, c, f, next, out)
	} else {
		st, err = pubPlain(ctx, c, f, next, out)
	}
	if err == nil {
		err = out.err
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix pub: %v\n", err)
		return exitFail
	}
	took := time.Since(start)
	if f.json {
		writeJSONLine(stdout, map[string]any{"messages": st.messages, "bytes": st.bytes, "seconds": took.Seconds()})
	} else {
		fmt.Fprintf(stderr, "published %s (%d bytes) in %s\n", plural(st.messages, "message"), st.bytes, took.Round(time.Microsecond))
	}
	return exitOK
}

// ackPrinter prints where each acked batch landed.
type ackPrinter struct {
	w    io.Writer
	json bool
	err  error // the first write that failed (stdout gone)
}

func (p *ackPrinter) print(res client.Ack, n int) {
	if p.err != nil {
		return
	}
	shard, offset := any(res.Shard), any(res.Offset)
	if !res.HasShard {
		shard = nil
	}
	if !res.HasOffset {
		offset = nil
	}
	if p.json {
		p.err = writeJSONLine(p.w, map[string]any{"shard": shard, "offset": offset, "count": n})
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%s %s\n", orDash(shard), orDash(offset))
}

func orDash(v any) string {
	if v == nil {
		return "-" // a broker that does not say
	}
	return fmt.Sprint(v)
}

// pubPlain publishes through a client.Publisher: acked (pipelined) or
// fire-and-forget.
func pubPlain(ctx context.Context, c *client.Client, f *pubFlags, next batches, out *ackPrinter) (pubStats, error) {
	octx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	p, err := c.NewPublisher(octx, f.conn.namespace, f.conn.stream)
	cancel()
	if err != nil {
		return pubStats{}, err
	}
	var st pubStats
	if f.ack {
		st, err = publishAcked(ctx, p, f, next, out)
	} else {
		st, err = sendAll(p, f, next)
	}
	// Close waits until the broker has read everything and answered, so a
	// fire-and-forget refusal is known after it.
	p.Close(ctx)
	if err == nil && !f.ack {
		err = p.Err()
	}
	return st, err
}

// pubIdempotent publishes through a client.IdempotentPublisher: its window
// of 64 batches in flight, each checked when it is answered.
func pubIdempotent(ctx context.Context, c *client.Client, f *pubFlags, next batches, out *ackPrinter) (pubStats, error) {
	octx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	p, err := c.NewIdempotentPublisher(octx, f.conn.namespace, f.conn.stream, client.IdempotentOptions{Shard: uint32(max(f.shard, 0))})
	cancel()
	if err != nil {
		return pubStats{}, err
	}
	var key []byte
	if f.given["key"] {
		key = []byte(f.key)
	}
	st, err := pipeline(ctx, 64, next, out, func(batch [][]byte) *client.PendingAck {
		if len(f.headers) > 0 {
			return p.PublishMessagesAsync(ctx, key, f.messages(batch))
		}
		return p.PublishAsync(ctx, key, batch)
	})
	if cerr := p.Close(ctx); err == nil {
		err = cerr
	}
	return st, err
}

type pubStats struct{ messages, bytes int }

func (st *pubStats) add(batch [][]byte) {
	st.messages += len(batch)
	for _, b := range batch {
		st.bytes += len(b)
	}
}

// publishAcked keeps up to ackWindow batches in flight on p.
func publishAcked(ctx context.Context, p *client.Publisher, f *pubFlags, next batches, out *ackPrinter) (pubStats, error) {
	return pipeline(ctx, ackWindow, next, out, func(batch [][]byte) *client.PendingAck {
		switch {
		case f.given["shard"]:
			return p.PublishShardAsync(uint32(f.shard), batch)
		case f.given["key"]:
			return p.PublishKeyAsync([]byte(f.key), batch)
		case len(f.headers) > 0:
			return p.PublishMessagesAsync(f.messages(batch))
		}
		return p.PublishAsync(batch)
	})
}

// pipeline sends every batch with send, keeping up to window of them in
// flight, and checks every ack in order of sending (acks may arrive out of
// order; waiting in order only delays noticing a refusal, never misses
// one, and prints in order).
func pipeline(ctx context.Context, window int, next batches, out *ackPrinter, send func([][]byte) *client.PendingAck) (pubStats, error) {
	type sent struct {
		pa *client.PendingAck
		n  int
	}
	var st pubStats
	inflight := make(chan sent, window)
	wait := func(s sent) error {
		err := s.pa.Wait(ctx)
		if err == nil {
			out.print(s.pa.Result(), s.n)
		}
		return err
	}
	var err error
	for err == nil {
		var batch [][]byte
		if batch, err = next(); err != nil || batch == nil {
			break
		}
		if len(inflight) == cap(inflight) {
			if err = wait(<-inflight); err != nil {
				break
			}
		}
		inflight <- sent{send(batch), len(batch)}
		st.add(batch)
	}
	close(inflight)
	for s := range inflight {
		if werr := wait(s); err == nil {
			err = werr
		}
	}
	return st, err
}

// sendAll publishes without acks.
func sendAll(p *client.Publisher, f *pubFlags, next batches) (pubStats, error) {
	var st pubStats
	for {
		batch, err := next()
		if err != nil || batch == nil {
			return st, err
		}
		switch {
		case f.given["shard"]:
			err = p.SendShard(uint32(f.shard), batch)
		case f.given["key"]:
			err = p.SendKey([]byte(f.key), batch)
		case len(f.headers) > 0:
			err = p.SendMessages(f.messages(batch))
		default:
			err = p.Send(batch)
		}
		if err != nil {
			return st, err
		}
		st.add(batch)
	}
}
