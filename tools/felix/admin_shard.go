package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

const adminShardUsage = `usage: felix admin shard VERB --stream S [flags]
  list [--stream S] [--under-replicated]   replicated shards: target replicas
        (the preferred leader first), the group's voters, learners and in-sync
        voters as its leader reported them, moving and under_replicated
  move --stream S --shard N --from A --to B   move the replica on A to B
  leader --stream S --shard N --to B          make B the preferred leader
  step-down --stream S --shard N [--to B]     hand the leadership over now
        (see felix admin shard step-down -h)
--tenant and --namespace (default "default"; list: any) name the stream;
list's flags filter. move and leader need an operator admin's token; a
refusal prints the control plane's code (not_found, bad_request, moving) and
message and exits 1.`

// shardRow is one replicated shard as felix admin shard list shows it.
type shardRow struct {
	cluster.Assignment
	Moving          bool `json:"moving"`
	UnderReplicated bool `json:"under_replicated"`
}

type shardFlags struct {
	cp                        *cpFlags
	tenant, namespace, stream string
	from, to                  string
	shard                     int
	underReplicated           bool
}

func runAdminShard(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "step-down" {
		return runShardStepDown(args, stdout, stderr)
	}
	set := flag.NewFlagSet("admin shard", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, adminShardUsage); set.PrintDefaults() }
	f := &shardFlags{cp: addCPFlags(set, true)}
	set.StringVar(&f.tenant, "tenant", "", "the stream's tenant `T`")
	set.StringVar(&f.namespace, "namespace", "", "the stream's namespace `N` (move, leader: default \"default\")")
	set.StringVar(&f.stream, "stream", "", "the stream `S`")
	set.IntVar(&f.shard, "shard", -1, "move/leader: the shard `N`")
	set.StringVar(&f.from, "from", "", "move: the member `ID` whose replica moves")
	set.StringVar(&f.to, "to", "", "move/leader: the member `ID` that takes it")
	set.BoolVar(&f.underReplicated, "under-replicated", false, "list: only shards with fewer in-sync voters than replicas")
	if len(args) == 0 {
		set.Usage()
		return exitUsage
	}
	verb := args[0]
	if err := set.Parse(args[1:]); err != nil {
		return exitUsage
	}
	if set.NArg() > 0 {
		fmt.Fprintf(stderr, "felix admin shard: unexpected argument %q\n", set.Arg(0))
		return exitUsage
	}
	out, err := f.run(verb)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "felix admin shard:", err)
		return exitUsage
	case err != nil:
		fmt.Fprintln(stderr, "felix admin shard:", err)
		return exitFail
	}
	stdout.Write(append(out, '\n'))
	return exitOK
}

// usageError is a mistake in the command line, not a refusal.
type usageError struct{ error }

func (f *shardFlags) run(verb string) ([]byte, error) {
	if err := f.cp.check(); err != nil {
		return nil, usageError{err}
	}
	if verb == "list" {
		return f.list()
	}
	if f.namespace == "" {
		f.namespace = "default"
	}
	var body any
	switch {
	case verb != "move" && verb != "leader":
		return nil, usageError{fmt.Errorf("unknown verb %q (want list, move, leader or step-down)", verb)}
	case f.stream == "" || f.tenant == "" || f.shard < 0:
		return nil, usageError{fmt.Errorf("%s needs --tenant, --stream and --shard", verb)}
	case f.to == "" || verb == "move" && f.from == "":
		return nil, usageError{fmt.Errorf("%s needs %s", verb, map[bool]string{true: "--from and --to", false: "--to"}[verb == "move"])}
	case verb == "move":
		body = api.MoveRequest{From: f.from, To: f.to}
	default:
		body = api.LeaderRequest{To: f.to}
	}
	path := "/v1/shards/" + url.PathEscape(f.tenant) + "/" + url.PathEscape(f.namespace) + "/" + url.PathEscape(f.stream) + "/" + strconv.Itoa(f.shard) + "/" + verb
	var resp api.ShardChangeResponse
	if err := f.cp.call("POST", path, body, &resp); err != nil {
		return nil, err
	}
	return json.MarshalIndent(resp, "", "  ")
}

// list reads the placement and shows its replicated shards that match the
// flags.
func (f *shardFlags) list() ([]byte, error) {
	var p cluster.Placement
	if err := f.cp.call("GET", "/v1/placement", nil, &p); err != nil {
		return nil, err
	}
	rows := []shardRow{}
	for _, a := range p.Assignments {
		switch {
		case !a.Replicated(),
			f.tenant != "" && a.Tenant != f.tenant,
			f.namespace != "" && a.Namespace != f.namespace,
			f.stream != "" && a.Stream != f.stream,
			f.underReplicated && !a.UnderReplicated():
			continue
		}
		rows = append(rows, shardRow{Assignment: a, Moving: a.Moving(), UnderReplicated: a.UnderReplicated()})
	}
	return json.MarshalIndent(struct {
		Version int64      `json:"version"`
		Shards  []shardRow `json:"shards"`
	}{p.Version, rows}, "", "  ")
}
