package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/cli"
)

const queueUsage = `usage: felix queue consume --stream S --group G [--count N] [--ack] [--json]
Joins consumer group G of durable stream S (every shard of it) and prints one
line per delivered record, "SHARD OFFSET REDELIVERIES PAYLOAD" (offsets are
per shard). With --ack each record is acked (and the ack made durable) after
it is printed; without, the records go back to the group when this consumer
exits or after the visibility timeout. --json prints
{"shard":S,"offset":O,"redeliveries":R,"payload":"..."} per line.`

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
	json  bool
	opts  client.QueueOptions
}

func newQueueFlags() (*flag.FlagSet, *queueFlags) {
	set := flag.NewFlagSet("felix queue consume", flag.ContinueOnError)
	f := &queueFlags{conn: addConnFlags(set)}
	set.StringVar(&f.group, "group", "", "consumer group `G` (required)")
	set.IntVar(&f.count, "count", 0, "exit after `N` records (0: until interrupted)")
	set.BoolVar(&f.ack, "ack", false, "ack each record after printing it")
	set.BoolVar(&f.json, "json", false, "print JSON lines (see above)")
	set.StringVar(&f.opts.Member, "member", "", "member `NAME` in the group (default HOST-PID)")
	set.IntVar(&f.opts.MaxInflight, "max-inflight", 0, "unacked records out to this consumer at most (0: broker default 64)")
	set.DurationVar(&f.opts.VisibilityTimeout, "visibility", 0, "redeliver a record not acked within this `DURATION` (0: broker default 30s)")
	return set, f
}

func parseQueueFlags(args []string) (*flag.FlagSet, *queueFlags, error) {
	set, f := newQueueFlags()
	pos, err := cli.Parse(set, args)
	if err == nil {
		err = f.conn.check(set)
	}
	switch {
	case err != nil:
	case len(pos) != 0:
		err = fmt.Errorf("unexpected argument %q", pos[0])
	case f.group == "":
		err = errors.New("--group is required")
	case f.count < 0 || f.opts.MaxInflight < 0 || f.opts.VisibilityTimeout < 0:
		err = errors.New("--count, --max-inflight and --visibility must not be negative")
	case f.opts.VisibilityTimeout > 0 && f.opts.VisibilityTimeout < time.Millisecond:
		err = errors.New("--visibility must be at least 1ms")
	}
	return set, f, err
}

func queue(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isQueueAdmin(args[0]) {
		return queueAdmin(ctx, args[0], args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "consume" {
		both := queueUsage + "\n\n" + queueAdminUsage
		if len(args) > 0 && cli.IsHelp(args[0]) {
			return cli.Fail(cli.ErrHelp, "felix queue", both, nil, stdout, stderr)
		}
		if len(args) == 0 {
			cli.PrintUsage(stderr, both, nil)
			return exitUsage
		}
		return cli.Fail(fmt.Errorf("want consume, %s", strings.Join(queueAdminOps, ", ")), "felix queue", both, nil, stdout, stderr)
	}
	set, f, err := parseQueueFlags(args[1:])
	if err != nil {
		return cli.Fail(err, "felix queue consume", queueUsage, set, stdout, stderr)
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
		if err == nil && f.json {
			err = writeJSONLine(stdout, payloadFields(map[string]any{"shard": msg.Shard, "offset": msg.Offset,
				"redeliveries": msg.Redeliveries}, "payload", msg.Payload))
		} else if err == nil {
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
