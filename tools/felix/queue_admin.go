package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

const queueAdminUsage = `usage: felix queue describe     --stream S --group G [--shard N]
       felix queue dead-letters --stream S --group G [--shard N]
       felix queue redrive      --stream S --group G [--shard N] (OFFSET... | --all)
       felix queue seek         --stream S --group G [--shard N] (--to earliest|latest|OFFSET | --time RFC3339) [--if-new]
describe prints the group's position on one shard: committed, the shard's
tail and the lag between them, records in flight, owed again, dead letters
and the group's max attempts. dead-letters prints one offset per line;
redrive owes them to the group again; seek moves the group (--time: to the
first record appended at or after it).`

// queueAdmin runs the group operations of the published 0.6 groups.
func queueAdmin(ctx context.Context, op string, args []string, stdout, stderr io.Writer) int {
	set := flag.NewFlagSet("felix queue "+op, flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, queueAdminUsage); set.PrintDefaults() }
	conn := addConnFlags(set)
	var (
		group, to, at string
		shard         uint
		all, ifNew    bool
	)
	set.StringVar(&group, "group", "", "consumer group `G` (required)")
	set.UintVar(&shard, "shard", 0, "shard `N` of the stream")
	if op == "redrive" {
		set.BoolVar(&all, "all", false, "redrive every dead letter of the shard")
	}
	if op == "seek" {
		set.StringVar(&to, "to", "", "earliest, latest or an `OFFSET`")
		set.StringVar(&at, "time", "", "the first record appended at or after `RFC3339`")
		set.BoolVar(&ifNew, "if-new", false, "move only a group that has no position yet")
	}
	pos, err := parseInterleaved(set, args)
	if err == nil {
		err = conn.check(set)
	}
	if err == nil {
		err = checkQueueAdmin(op, group, pos, all, to, at)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "felix queue %s: %v\n%s\n", op, err, queueAdminUsage)
		}
		return exitUsage
	}
	c, err := conn.dial(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "felix queue %s: %v\n", op, err)
		return exitFail
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, conn.timeout)
	defer cancel()
	g, err := c.OpenGroup(ctx, conn.namespace, conn.stream, group)
	if err == nil {
		defer g.Close(ctx)
		q := queueOp{c: c, g: g, stream: conn, shard: uint32(shard), out: stdout}
		switch op {
		case "describe":
			err = q.describe(ctx)
		case "dead-letters":
			err = q.deadLetters(ctx)
		case "redrive":
			err = q.redrive(ctx, pos, all)
		case "seek":
			err = q.seek(ctx, to, at, ifNew)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix queue %s: %v\n", op, err)
		return exitFail
	}
	return exitOK
}

func checkQueueAdmin(op, group string, pos []string, all bool, to, at string) error {
	switch {
	case group == "":
		return errors.New("--group is required")
	case op == "redrive" && (len(pos) == 0) == !all:
		return errors.New("want OFFSET... or --all")
	case op == "seek" && (to == "") == (at == ""):
		return errors.New("want one of --to and --time")
	case op != "redrive" && len(pos) != 0:
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	for _, p := range pos {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return fmt.Errorf("OFFSET %q is not an offset", p)
		}
	}
	return nil
}

// queueOp is one admin operation on a group's shard.
type queueOp struct {
	c      *client.Client
	g      *client.Group
	stream *connFlags
	shard  uint32
	out    io.Writer
}

func (q queueOp) describe(ctx context.Context) error {
	info, err := q.g.Describe(ctx, q.shard)
	if err != nil {
		return err
	}
	committed, lag := "none", info.Tail
	if info.Exists {
		committed, lag = strconv.FormatUint(info.Committed, 10), info.Tail-min(info.Committed, info.Tail)
	}
	_, err = fmt.Fprintf(q.out, "shard=%d committed=%s tail=%d lag=%d in_flight=%d owed=%d dead_letters=%d max_attempts=%d\n",
		q.shard, committed, info.Tail, lag, info.InFlight, info.Owed, info.DeadLetters, info.MaxAttempts)
	return err
}

func (q queueOp) deadLetters(ctx context.Context) error {
	offs, err := q.g.DeadLetters(ctx, q.shard)
	for _, off := range offs {
		if _, err := fmt.Fprintln(q.out, off); err != nil {
			return err
		}
	}
	return err
}

func (q queueOp) redrive(ctx context.Context, pos []string, all bool) error {
	offs := make([]uint64, 0, len(pos))
	for _, p := range pos {
		off, _ := strconv.ParseUint(p, 10, 64) // checked
		offs = append(offs, off)
	}
	if all {
		var err error
		if offs, err = q.g.DeadLetters(ctx, q.shard); err != nil {
			return err
		}
	}
	for _, off := range offs {
		if err := q.g.Redrive(ctx, q.shard, off); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(q.out, "redriven %d\n", len(offs))
	return err
}

func (q queueOp) seek(ctx context.Context, to, at string, ifNew bool) error {
	var start wire.Start
	switch {
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return fmt.Errorf("--time %q is not RFC 3339", at)
		}
		off, found, err := q.c.OffsetForTime(ctx, q.stream.namespace, q.stream.stream, q.shard, t)
		if err != nil {
			return err
		}
		start = wire.Start{Kind: wire.StartOffset, Offset: off}
		if !found {
			start = wire.Start{Kind: wire.StartLatest} // nothing that recent yet
		}
	case strings.EqualFold(to, "earliest"):
		start = wire.Start{Kind: wire.StartEarliest}
	case strings.EqualFold(to, "latest"):
		start = wire.Start{Kind: wire.StartLatest}
	default:
		off, err := strconv.ParseUint(to, 10, 64)
		if err != nil {
			return fmt.Errorf("--to %q is not earliest, latest or an offset", to)
		}
		start = wire.Start{Kind: wire.StartOffset, Offset: off}
	}
	pos, moved, err := q.g.Seek(ctx, q.shard, start, ifNew)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(q.out, "position=%d moved=%v\n", pos, moved)
	return err
}
