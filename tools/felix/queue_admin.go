package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/wire"
)

const queueAdminUsage = `usage: felix queue describe     --stream S --group G [--shard N] [--json]
       felix queue dead-letters --stream S --group G [--shard N] [--json]
       felix queue redrive      --stream S --group G [--shard N] (OFFSET... | --all) [--json]
       felix queue seek         --stream S --group G [--shard N] (--to earliest|latest|OFFSET | --time RFC3339) [--if-new] [--json]
describe prints the group's position on one shard: committed, the shard's
tail and the lag between them, records in flight, owed again, dead letters
and the group's max attempts. dead-letters prints one offset per line;
redrive owes them to the group again; seek moves the group (--time: to the
first record appended at or after it). --json prints one JSON object per
line instead: describe's fields, {"offset":O} per dead letter,
{"redriven":N}, {"position":P,"moved":B}.`

// queueAdminOps are the group operations of the published 0.6 groups.
var queueAdminOps = []string{"describe", "dead-letters", "redrive", "seek"}

func isQueueAdmin(op string) bool { return slices.Contains(queueAdminOps, op) }

// queueAdminFlags are the flags of every queue admin operation.
type queueAdminFlags struct {
	conn       *connFlags
	group      string
	shard      uint
	all, ifNew bool
	to, at     string
	json       bool
	// parsed by check: --time, else --to.
	atTime time.Time
	toPos  wire.Start
}

// newQueueAdminFlags is the flag set of op ("" for every flag of every
// operation, for shell completion).
func newQueueAdminFlags(op string) (*flag.FlagSet, *queueAdminFlags) {
	set := flag.NewFlagSet("felix queue "+op, flag.ContinueOnError)
	f := &queueAdminFlags{conn: addConnFlags(set)}
	set.StringVar(&f.group, "group", "", "consumer group `G` (required)")
	set.UintVar(&f.shard, "shard", 0, "shard `N` of the stream")
	set.BoolVar(&f.json, "json", false, "print JSON lines (see above)")
	if op == "redrive" || op == "" {
		set.BoolVar(&f.all, "all", false, "redrive every dead letter of the shard")
	}
	if op == "seek" || op == "" {
		set.StringVar(&f.to, "to", "", "earliest, latest or an `OFFSET`")
		set.StringVar(&f.at, "time", "", "the first record appended at or after `RFC3339`")
		set.BoolVar(&f.ifNew, "if-new", false, "move only a group that has no position yet")
	}
	return set, f
}

// queueAdmin runs one group operation on one shard.
func queueAdmin(ctx context.Context, op string, args []string, stdout, stderr io.Writer) int {
	set, f := newQueueAdminFlags(op)
	pos, err := cli.Parse(set, args)
	if err == nil {
		err = f.conn.check(set)
	}
	if err == nil {
		err = f.check(op, pos)
	}
	if err != nil {
		return cli.Fail(err, "felix queue "+op, queueAdminUsage, set, stdout, stderr)
	}
	c, err := f.conn.dial(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "felix queue %s: %v\n", op, err)
		return exitFail
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	defer cancel()
	g, err := c.OpenGroup(ctx, f.conn.namespace, f.conn.stream, f.group)
	if err == nil {
		defer g.Close(ctx)
		q := queueOp{c: c, g: g, f: f, shard: uint32(f.shard), out: stdout}
		switch op {
		case "describe":
			err = q.describe(ctx)
		case "dead-letters":
			err = q.deadLetters(ctx)
		case "redrive":
			err = q.redrive(ctx, pos)
		case "seek":
			err = q.seek(ctx)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix queue %s: %v\n", op, err)
		return exitFail
	}
	return exitOK
}

func (f *queueAdminFlags) check(op string, pos []string) error {
	switch {
	case f.group == "":
		return errors.New("--group is required")
	case f.shard > 1<<32-1:
		return fmt.Errorf("--shard %d: want a shard number", f.shard)
	case op == "redrive" && (len(pos) == 0) == !f.all:
		return errors.New("want OFFSET... or --all")
	case op == "seek" && (f.to == "") == (f.at == ""):
		return errors.New("want one of --to and --time")
	case op != "redrive" && len(pos) != 0:
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	for _, p := range pos {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return fmt.Errorf("OFFSET %q is not an offset", p)
		}
	}
	var err error
	switch {
	case f.at != "":
		if f.atTime, err = time.Parse(time.RFC3339Nano, f.at); err != nil {
			return fmt.Errorf("--time %q is not RFC 3339 (e.g. 2026-01-01T10:00:00Z)", f.at)
		}
	case strings.EqualFold(f.to, "earliest"):
		f.toPos = wire.Start{Kind: wire.StartEarliest}
	case strings.EqualFold(f.to, "latest"):
		f.toPos = wire.Start{Kind: wire.StartLatest}
	case f.to != "":
		off, err := strconv.ParseUint(f.to, 10, 64)
		if err != nil {
			return fmt.Errorf("--to %q is not earliest, latest or an offset", f.to)
		}
		f.toPos = wire.Start{Kind: wire.StartOffset, Offset: off}
	}
	return nil
}

// queueOp is one admin operation on a group's shard.
type queueOp struct {
	c     *client.Client
	g     *client.Group
	f     *queueAdminFlags
	shard uint32
	out   io.Writer
}

// print writes text, or obj as a JSON line with --json.
func (q queueOp) print(text string, obj map[string]any) error {
	if q.f.json {
		return writeJSONLine(q.out, obj)
	}
	_, err := fmt.Fprintln(q.out, text)
	return err
}

func (q queueOp) describe(ctx context.Context) error {
	info, err := q.g.Describe(ctx, q.shard)
	if err != nil {
		return err
	}
	committed, jcommitted, lag := "none", any(nil), info.Tail
	if info.Exists {
		committed, jcommitted, lag = strconv.FormatUint(info.Committed, 10), info.Committed, info.Tail-min(info.Committed, info.Tail)
	}
	return q.print(fmt.Sprintf("shard=%d committed=%s tail=%d lag=%d in_flight=%d owed=%d dead_letters=%d max_attempts=%d",
		q.shard, committed, info.Tail, lag, info.InFlight, info.Owed, info.DeadLetters, info.MaxAttempts),
		map[string]any{"shard": q.shard, "committed": jcommitted, "tail": info.Tail, "lag": lag, "in_flight": info.InFlight,
			"owed": info.Owed, "dead_letters": info.DeadLetters, "max_attempts": info.MaxAttempts})
}

func (q queueOp) deadLetters(ctx context.Context) error {
	offs, err := q.g.DeadLetters(ctx, q.shard)
	for _, off := range offs {
		if err := q.print(strconv.FormatUint(off, 10), map[string]any{"offset": off}); err != nil {
			return err
		}
	}
	return err
}

func (q queueOp) redrive(ctx context.Context, pos []string) error {
	offs := make([]uint64, 0, len(pos))
	for _, p := range pos {
		off, _ := strconv.ParseUint(p, 10, 64) // checked
		offs = append(offs, off)
	}
	if q.f.all {
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
	return q.print(fmt.Sprintf("redriven %d", len(offs)), map[string]any{"redriven": len(offs)})
}

func (q queueOp) seek(ctx context.Context) error {
	start, err := q.start(ctx)
	if err != nil {
		return err
	}
	pos, moved, err := q.g.Seek(ctx, q.shard, start, q.f.ifNew)
	if err != nil {
		return err
	}
	return q.print(fmt.Sprintf("position=%d moved=%v", pos, moved), map[string]any{"position": pos, "moved": moved})
}

// start is where --to or --time says the group goes.
func (q queueOp) start(ctx context.Context) (wire.Start, error) {
	if q.f.at == "" {
		return q.f.toPos, nil
	}
	off, found, err := q.c.OffsetForTime(ctx, q.f.conn.namespace, q.f.conn.stream, q.shard, q.f.atTime)
	switch {
	case err != nil:
		return wire.Start{}, err
	case !found:
		return wire.Start{Kind: wire.StartLatest}, nil // nothing that recent yet
	}
	return wire.Start{Kind: wire.StartOffset, Offset: off}, nil
}
