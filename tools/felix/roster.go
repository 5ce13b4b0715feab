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
)

const rosterUsage = `usage: felix roster join [flags] --roster R [--meta JSON] MEMBER
       felix roster watch [flags] --roster R [--count N]
join adds MEMBER to roster R and stays joined until interrupted (the member
leaves when the connection closes). watch prints the current set as
"member NAME [META]" lines and "synced N", then "join NAME [META]" and
"leave NAME" as they happen ("GAP dropped=N" on stderr if changes were
dropped: the state is then stale, watch again). Rosters are created by their
first join or watch.`

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
}

func parseRosterFlags(verb string, args []string, stderr io.Writer) (*rosterFlags, []string, error) {
	set := flag.NewFlagSet("felix roster "+verb, flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, rosterUsage); set.PrintDefaults() }
	f := &rosterFlags{conn: addConnFlags(set)}
	set.StringVar(&f.roster, "roster", "", "roster `R` (required)")
	if verb == "join" {
		set.StringVar(&f.meta, "meta", "", "member metadata, a `JSON` document")
	} else {
		set.IntVar(&f.count, "count", 0, "exit after `N` changes (0: until interrupted)")
	}
	if err := set.Parse(args); err != nil {
		return nil, nil, err
	}
	if err := f.conn.check(set); err != nil {
		return nil, nil, err
	}
	switch {
	case f.roster == "":
		return nil, nil, errors.New("--roster is required")
	case verb == "join" && set.NArg() != 1:
		return nil, nil, errors.New("join takes exactly one MEMBER")
	case verb == "watch" && set.NArg() != 0:
		return nil, nil, fmt.Errorf("unexpected argument %q", set.Arg(0))
	case f.meta != "" && !json.Valid([]byte(f.meta)):
		return nil, nil, errors.New("--meta must be a JSON document")
	case f.count < 0:
		return nil, nil, errors.New("--count must be at least 0")
	}
	return f, set.Args(), nil
}

func roster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "join" && args[0] != "watch") {
		fmt.Fprintln(stderr, rosterUsage)
		return exitUsage
	}
	verb := args[0]
	f, rest, err := parseRosterFlags(verb, args[1:], stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "felix roster %s: %v\n%s\n", verb, err, rosterUsage)
		}
		return exitUsage
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
		fmt.Fprintf(stdout, "joined %s as %s\n", f.roster, rest[0])
		<-ctx.Done() // the member stays until the connection closes
		return exitOK
	}
	return watchRoster(ctx, w, f.count, stdout, stderr)
}

// watchRoster prints the snapshot and then changes.
func watchRoster(ctx context.Context, w *client.RosterWatch, count int, stdout, stderr io.Writer) int {
	defer w.Close()
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
				fmt.Fprintln(stdout, memberLine("member", m))
			}
			fmt.Fprintf(stdout, "synced %d\n", len(ev.Members))
		case client.RosterJoinEvent:
			fmt.Fprintln(stdout, memberLine("join", ev.Member))
			n++
		case client.RosterLeaveEvent:
			fmt.Fprintln(stdout, "leave "+ev.Member.Member)
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
