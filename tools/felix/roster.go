package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/cli"
)

const rosterUsage = `usage: felix roster join MEMBER --roster R [--meta JSON] [--json]
       felix roster watch --roster R [--count N] [--json]
join adds MEMBER to roster R and stays joined until interrupted (the member
leaves when the connection closes); it prints "joined R as MEMBER". watch
prints the current set as "member NAME [META]" lines and "synced N", then
"join NAME [META]" and "leave NAME" as they happen ("GAP dropped=N" on
stderr if changes were dropped: the state is then stale, watch again).
Rosters are created by their first join or watch. --json prints
{"event":"member|synced|join|leave|joined","member":M,"meta":{...},"members":N}
objects, one per line.`

// runRoster is `felix roster`; SIGINT and SIGTERM end it cleanly (exit 0).
func runRoster(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return roster(ctx, args, stdout, stderr)
}

type rosterFlags struct {
	conn   *connFlags
	roster string
	meta   string
	count  int
	json   bool
}

// newRosterFlags is the flag set of verb ("" for every flag).
func newRosterFlags(verb string) (*flag.FlagSet, *rosterFlags) {
	set := flag.NewFlagSet("felix roster "+verb, flag.ContinueOnError)
	f := &rosterFlags{conn: addConnFlags(set)}
	set.StringVar(&f.roster, "roster", "", "roster `R` (required)")
	set.BoolVar(&f.json, "json", false, "print JSON lines (see above)")
	if verb != "watch" {
		set.StringVar(&f.meta, "meta", "", "member metadata, a `JSON` document")
	}
	if verb != "join" {
		set.IntVar(&f.count, "count", 0, "exit after `N` changes (0: until interrupted)")
	}
	return set, f
}

func parseRosterFlags(verb string, args []string) (*flag.FlagSet, *rosterFlags, []string, error) {
	set, f := newRosterFlags(verb)
	pos, err := cli.Parse(set, args)
	if err == nil {
		err = f.conn.check(set)
	}
	switch {
	case err != nil:
	case f.roster == "":
		err = errors.New("--roster is required")
	case verb == "join" && len(pos) != 1:
		err = errors.New("join takes exactly one MEMBER")
	case verb == "watch" && len(pos) != 0:
		err = fmt.Errorf("unexpected argument %q", pos[0])
	case f.meta != "" && !json.Valid([]byte(f.meta)):
		err = errors.New("--meta must be a JSON document")
	case f.count < 0:
		err = errors.New("--count must be at least 0")
	}
	return set, f, pos, err
}

func roster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "join" && args[0] != "watch") {
		if len(args) > 0 && cli.IsHelp(args[0]) {
			return cli.Fail(cli.ErrHelp, "felix roster", rosterUsage, nil, stdout, stderr)
		}
		if len(args) == 0 {
			cli.PrintUsage(stderr, rosterUsage, nil)
			return exitUsage
		}
		return cli.Fail(errors.New("want join or watch"), "felix roster", rosterUsage, nil, stdout, stderr)
	}
	verb := args[0]
	set, f, rest, err := parseRosterFlags(verb, args[1:])
	if err != nil {
		return cli.Fail(err, "felix roster "+verb, rosterUsage, set, stdout, stderr)
	}
	c, err := f.conn.dial(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "felix roster %s: %v\n", verb, err)
		return exitFail
	}
	defer c.Close()
	octx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	r, err := c.Roster(octx, f.conn.namespace, f.roster)
	if err == nil && verb == "join" {
		var meta []byte
		if f.meta != "" {
			meta = []byte(f.meta)
		}
		err = r.Join(octx, rest[0], meta)
	}
	var w *client.RosterWatch
	if err == nil && verb == "watch" {
		w, err = r.Watch(octx)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "felix roster %s: %v\n", verb, err)
		return exitFail
	}
	if verb == "join" {
		if f.json {
			writeJSONLine(stdout, map[string]any{"event": "joined", "roster": f.roster, "member": rest[0]})
		} else {
			fmt.Fprintf(stdout, "joined %s as %s\n", f.roster, rest[0])
		}
		<-ctx.Done() // the member stays until the connection closes
		return exitOK
	}
	return watchRoster(ctx, w, f.count, f.json, stdout, stderr)
}

// watchRoster prints the snapshot and then changes.
func watchRoster(ctx context.Context, w *client.RosterWatch, count int, asJSON bool, stdout, stderr io.Writer) int {
	defer w.Close()
	line := func(verb string, m client.RosterMember) {
		if asJSON {
			obj := map[string]any{"event": verb, "member": m.Member}
			if m.Metadata != nil {
				obj["meta"] = json.RawMessage(m.Metadata)
			}
			writeJSONLine(stdout, obj)
			return
		}
		fmt.Fprintln(stdout, memberLine(verb, m))
	}
	for n := 0; count == 0 || n < count; {
		ev, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			fmt.Fprintf(stderr, "felix roster watch: %v\n", err)
			return exitFail
		}
		switch ev.Kind {
		case client.RosterSnapshotEvent:
			for _, m := range ev.Members {
				line("member", m)
			}
			if asJSON {
				writeJSONLine(stdout, map[string]any{"event": "synced", "members": len(ev.Members)})
			} else {
				fmt.Fprintf(stdout, "synced %d\n", len(ev.Members))
			}
		case client.RosterJoinEvent:
			line("join", ev.Member)
			n++
		case client.RosterLeaveEvent:
			line("leave", client.RosterMember{Member: ev.Member.Member})
			n++
		case client.RosterGapEvent:
			fmt.Fprintf(stderr, "GAP dropped=%d\n", ev.Dropped)
		}
	}
	return exitOK
}

func memberLine(verb string, m client.RosterMember) string {
	if m.Metadata == nil {
		return verb + " " + m.Member
	}
	return verb + " " + m.Member + " " + printable(m.Metadata)
}
