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
	"github.com/felixmq/felix/wire"
)

const pubUsage = `usage: felix pub [flags] [--count N] [--size B] [--ack] [--batch K] [MESSAGE]
Publishes MESSAGE, or a B-byte payload with --size, N times. With neither,
publishes each line of stdin as one message. Flags go before MESSAGE.

With --ack, batches go through an idempotent producer (unless
--idempotent=false): a batch whose connection fails is sent again under the
same sequence and the broker writes it once, so every message is in the
stream exactly once. They then go to shard --shard (default 0).

--header K=V (repeatable) gives every message that header; felix sub prints
them.`

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
	shard      uint
	headers    headerFlag
	countGiven bool
	sizeGiven  bool
}

// headerFlag collects --header K=V.
type headerFlag []wire.EventHeader

func (h *headerFlag) String() string { return wire.FormatHeaders(*h) }

func (h *headerFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q: want KEY=VALUE", s)
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

func parsePubFlags(args []string, stderr io.Writer) (*pubFlags, []string, error) {
	set := flag.NewFlagSet("felix pub", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, pubUsage); set.PrintDefaults() }
	f := &pubFlags{conn: addConnFlags(set)}
	set.IntVar(&f.count, "count", 1, "publish the message `N` times")
	set.IntVar(&f.size, "size", 0, "publish a payload of `B` bytes instead of MESSAGE")
	set.IntVar(&f.batch, "batch", 1, "`K` messages per publish batch")
	set.BoolVar(&f.ack, "ack", false, "wait for the broker's ack of every batch (pipelined)")
	set.BoolVar(&f.idempotent, "idempotent", true, "with --ack: publish through an idempotent producer (exactly once, re-sent after failures)")
	set.UintVar(&f.shard, "shard", 0, "with --ack and --idempotent: the `shard` to publish to")
	set.Var(&f.headers, "header", "`KEY=VALUE` header on every message (repeatable)")
	if err := set.Parse(args); err != nil {
		return nil, nil, err
	}
	set.Visit(func(fl *flag.Flag) {
		f.countGiven = f.countGiven || fl.Name == "count"
		f.sizeGiven = f.sizeGiven || fl.Name == "size"
	})
	if err := f.conn.check(set); err != nil {
		return nil, nil, err
	}
	switch {
	case set.NArg() > 1:
		return nil, nil, errors.New("one MESSAGE only (quote it; flags go before it)")
	case set.NArg() == 1 && f.sizeGiven:
		return nil, nil, errors.New("pass MESSAGE or --size, not both")
	case set.NArg() == 0 && !f.sizeGiven && f.countGiven:
		return nil, nil, errors.New("--count needs MESSAGE or --size (stdin publishes each line once)")
	case f.count < 1 || f.batch < 1 || f.size < 0:
		return nil, nil, errors.New("--count and --batch must be at least 1, --size at least 0")
	}
	return f, set.Args(), nil
}

// pub publishes and prints a summary; ctx bounds the whole command.
func pub(ctx context.Context, args []string, in io.Reader, stdout, stderr io.Writer) int {
	f, rest, err := parsePubFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "felix pub: %v\n%s\n", err, pubUsage)
		}
		return exitUsage
	}
	var next batches
	switch {
	case f.sizeGiven:
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
	var st pubStats
	if f.ack && f.idempotent {
		st, err = pubIdempotent(ctx, c, f, next)
	} else {
		st, err = pubPlain(ctx, c, f, next)
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix pub: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stderr, "published %d messages (%d bytes) in %s\n", st.messages, st.bytes, time.Since(start).Round(time.Microsecond))
	return exitOK
}

// pubPlain publishes through a client.Publisher: acked (pipelined) or
// fire-and-forget.
func pubPlain(ctx context.Context, c *client.Client, f *pubFlags, next batches) (pubStats, error) {
	octx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	p, err := c.NewPublisher(octx, f.conn.namespace, f.conn.stream)
	cancel()
	if err != nil {
		return pubStats{}, err
	}
	var st pubStats
	if f.ack {
		st, err = publishAcked(ctx, p, f, next)
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
func pubIdempotent(ctx context.Context, c *client.Client, f *pubFlags, next batches) (pubStats, error) {
	octx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	p, err := c.NewIdempotentPublisher(octx, f.conn.namespace, f.conn.stream, client.IdempotentOptions{Shard: uint32(f.shard)})
	cancel()
	if err != nil {
		return pubStats{}, err
	}
	var st pubStats
	inflight := make(chan *client.PendingAck, 64)
	for err == nil {
		var batch [][]byte
		if batch, err = next(); err != nil || batch == nil {
			break
		}
		if len(inflight) == cap(inflight) {
			err = (<-inflight).Wait(ctx)
		}
		if len(f.headers) > 0 {
			inflight <- p.PublishMessagesAsync(ctx, nil, f.messages(batch))
		} else {
			inflight <- p.PublishAsync(ctx, nil, batch)
		}
		st.add(batch)
	}
	close(inflight)
	for pa := range inflight {
		if werr := pa.Wait(ctx); err == nil {
			err = werr
		}
	}
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

// publishAcked keeps up to ackWindow batches in flight and checks every ack
// in order of sending (acks may arrive out of order; waiting in order only
// delays noticing a refusal, never misses one).
func publishAcked(ctx context.Context, p *client.Publisher, f *pubFlags, next batches) (pubStats, error) {
	var st pubStats
	inflight := make(chan *client.PendingAck, ackWindow)
	for {
		batch, err := next()
		if err != nil || batch == nil {
			close(inflight)
			for pa := range inflight {
				if werr := pa.Wait(ctx); err == nil {
					err = werr
				}
			}
			return st, err
		}
		if len(inflight) == cap(inflight) {
			if err := (<-inflight).Wait(ctx); err != nil {
				return st, err
			}
		}
		if len(f.headers) > 0 {
			inflight <- p.PublishMessagesAsync(f.messages(batch))
		} else {
			inflight <- p.PublishAsync(batch)
		}
		st.add(batch)
	}
}

// sendAll publishes without acks.
func sendAll(p *client.Publisher, f *pubFlags, next batches) (pubStats, error) {
	var st pubStats
	for {
		batch, err := next()
		if err != nil || batch == nil {
			return st, err
		}
		if len(f.headers) > 0 {
			err = p.SendMessages(f.messages(batch))
		} else {
			err = p.Send(batch)
		}
		if err != nil {
			return st, err
		}
		st.add(batch)
	}
}
