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
	"time"

	"github.com/felixmq/felix/client"
)

const queueUsage = `usage: felix queue consume [flags] --stream S --group G [--count N] [--ack]
Joins consumer group G of durable stream S (every shard of it) and prints one
line per delivered record, "SHARD OFFSET REDELIVERIES PAYLOAD" (offsets are
per shard). With --ack each record is acked (and the ack made durable) after
it is printed; without, the records go back to the group when this consumer
exits or after the visibility timeout.`

// runQueue is `felix queue`; SIGINT and SIGTERM end it cleanly (exit 0).
func runQueue(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return queue(ctx, args, stdout, stderr)
}

type queueFlags struct {
	conn  *connFlags
	group string
	count int
	ack   bool
	opts  client.QueueOptions
}

func parseQueueFlags(args []string, stderr io.Writer) (*queueFlags, error) {
	set := flag.NewFlagSet("felix queue consume", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, queueUsage); set.PrintDefaults() }
	f := &queueFlags{conn: addConnFlags(set)}
	set.StringVar(&f.group, "group", "", "consumer group `G` (required)")
	set.IntVar(&f.count, "count", 0, "exit after `N` records (0: until interrupted)")
	set.BoolVar(&f.ack, "ack", false, "ack each record after printing it")
	set.StringVar(&f.opts.Member, "member", "", "member `NAME` in the group (default HOST-PID)")
	set.IntVar(&f.opts.MaxInflight, "max-inflight", 0, "unacked records out to this consumer at most (0: broker default 64)")
	set.DurationVar(&f.opts.VisibilityTimeout, "visibility", 0, "redeliver a record not acked within this `DURATION` (0: broker default 30s)")
	if err := set.Parse(args); err != nil {
		return nil, err
	}
	if err := f.conn.check(set); err != nil {
		return nil, err
	}
	switch {
	case set.NArg() != 0:
		return nil, fmt.Errorf("unexpected argument %q", set.Arg(0))
	case f.group == "":
		return nil, errors.New("--group is required")
	case f.count < 0 || f.opts.MaxInflight < 0 || f.opts.VisibilityTimeout < 0:
		return nil, errors.New("--count, --max-inflight and --visibility must not be negative")
	case f.opts.VisibilityTimeout > 0 && f.opts.VisibilityTimeout < time.Millisecond:
		return nil, errors.New("--visibility must be at least 1ms")
	}
	return f, nil
}

func queue(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "describe", "dead-letters", "redrive", "seek":
			return queueAdmin(ctx, args[0], args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || args[0] != "consume" {
		fmt.Fprintln(stderr, queueUsage)
		fmt.Fprintln(stderr, queueAdminUsage)
		return exitUsage
	}
	f, err := parseQueueFlags(args[1:], stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "felix queue consume: %v\n%s\n", err, queueUsage)
		}
		return exitUsage
	}
	c, err := f.conn.dial(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "felix queue consume: %v\n", err)
		return exitFail
	}
	defer c.Close()
	octx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	q, err := c.Consume(octx, f.conn.namespace, f.conn.stream, f.group, f.opts)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "felix queue consume: %v\n", err)
		return exitFail
	}
	defer q.Close()
	for n := 0; f.count == 0 || n < f.count; n++ {
		msg, err := q.Next(ctx)
		if err == nil {
			_, err = fmt.Fprintf(stdout, "%d %d %d %s\n", msg.Shard, msg.Offset, msg.Redeliveries, printable(msg.Payload))
		}
		if err == nil && f.ack {
			err = q.Ack(ctx, msg.Ref())
		}
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			fmt.Fprintf(stderr, "felix queue consume: %v\n", err)
			return exitFail
		}
	}
	return exitOK
}
