// Command felix is the Felix command-line tool. Each subcommand lives in its
// own file and registers in the commands table below.
//
// Every subcommand takes its flags before, between or after its
// arguments, answers --help on stdout with exit status 0, and finds the
// broker the same way (internal/endpoint: flags, the environment, a named
// context, the dev directory of a local broker).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/felixmq/felix/internal/cli"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem
	exitUsage = 2 // bad arguments
	exitLost  = 3 // felix sub: the broker reported events lost
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the exit code; output goes to the writers it is given so
// tests can call it directly. verbs and flags feed shell completion.
type command struct {
	name    string
	summary string
	verbs   []string
	flags   func() *flag.FlagSet // every flag of every verb; nil: none
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is the dispatch table; add new subcommands here.
var commands []command

func init() {
	commands = []command{
		{name: "pub", summary: "publish messages to a stream", flags: func() *flag.FlagSet { s, _ := newPubFlags(); return s }, run: runPub},
		{name: "sub", summary: "print a stream's events (every shard, or --shard)", flags: func() *flag.FlagSet { s, _ := newSubFlags(); return s }, run: runSub},
		{name: "cache", summary: "put, get and delete cache keys", verbs: []string{"put", "get", "del"},
			flags: func() *flag.FlagSet { return unionFlags(cacheFlagSet("cache put")(), cacheFlagSet("cache get")()) }, run: runCache},
		{name: "counter", summary: "add to and read counters", verbs: []string{"add", "get"}, flags: cacheFlagSet("counter add"), run: runCounter},
		{name: "watch", summary: "print every change of a cache key", flags: cacheFlagSet("watch"), run: runWatch},
		{name: "roster", summary: "join a roster (until interrupted) or watch its members", verbs: []string{"join", "watch"},
			flags: func() *flag.FlagSet { s, _ := newRosterFlags(""); return s }, run: runRoster},
		{name: "queue", summary: "consume a durable stream in a consumer group; describe, seek, redrive the group",
			verbs: append([]string{"consume"}, queueAdminOps...), flags: func() *flag.FlagSet {
				s, _ := newQueueFlags()
				a, _ := newQueueAdminFlags("")
				return unionFlags(s, a)
			}, run: runQueue},
		{name: "admin", summary: "create, list, describe and delete tenants, namespaces, streams and caches; list and move replicated shards",
			verbs: []string{"tenant", "namespace", "stream", "cache", "shard"}, flags: func() *flag.FlagSet { s, _ := newAdminFlags(); return s }, run: runAdmin},
		{name: "context", summary: "save, select and show named broker addresses and credentials",
			verbs: contextVerbs, flags: func() *flag.FlagSet { s, _ := newContextFlags(); return s }, run: runContext},
		{name: "token", summary: "exchange an identity provider's token for a Felix token, or mint one (development issuer)",
			verbs: []string{"exchange", "mint", "node"}, flags: tokenFlagSet, run: runToken},
		{name: "cert", summary: "make a development CA and sign broker certificates", flags: func() *flag.FlagSet { s, _, _, _ := newCertFlags(); return s }, run: runCert},
		{name: "probe", summary: "exit 0 if a health endpoint answers 2xx (container health checks)", flags: func() *flag.FlagSet { s, _ := newProbeFlags(); return s }, run: runProbe},
		{name: "log", summary: "verify, dump and stat a shard's log directory offline", verbs: []string{"verify", "dump", "stat"},
			flags: func() *flag.FlagSet { s, _ := newLogFlags("dump"); return s }, run: runLog},
		{name: "wire", summary: "check vector files and decode wire v1 frames", verbs: []string{"check", "decode"},
			flags: func() *flag.FlagSet { s, _ := newWireDecodeFlags(); return s }, run: runWire},
		{name: "completion", summary: "print a bash or zsh completion script", verbs: []string{"bash", "zsh"}, run: runCompletion},
		{name: "version", summary: "print the version", run: runVersion},
	}
}

// unionFlags is every flag of sets, the first declaration of a name
// winning (shell completion of a command whose verbs have flags of their
// own).
func unionFlags(sets ...*flag.FlagSet) *flag.FlagSet {
	out := flag.NewFlagSet("", flag.ContinueOnError)
	for _, set := range sets {
		set.VisitAll(func(fl *flag.Flag) {
			if out.Lookup(fl.Name) == nil {
				out.Var(fl.Value, fl.Name, fl.Usage)
			}
		})
	}
	return out
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if cli.IsHelp(args[0]) {
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr) // felix help pub
		}
		usage(stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(nil, stdout, stderr)
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "felix: unknown command %q (felix help lists them)\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: felix COMMAND [ARGS] [FLAGS]   (felix COMMAND --help for its own)")
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, `
Where the broker is, unless flags say: $FELIX_ADDR, $FELIX_ADMIN,
$FELIX_CONTROLPLANE, $FELIX_CA, $FELIX_TENANT and $FELIX_TOKEN; else the
context in effect ($FELIX_CONTEXT, or felix context use NAME); else what a
local broker wrote into its dev directory ($FELIX_DEV_DIR, default
/tmp/felix-dev); else 127.0.0.1:5000. felix context show says which.`)
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !cli.IsHelp(args[0]) {
		fmt.Fprintln(stderr, "felix version: no arguments")
		return exitUsage
	}
	fmt.Fprintln(stdout, cli.VersionLine("felix"))
	return exitOK
}

const completionUsage = `usage: felix completion bash|zsh
Prints a completion script: subcommands, their verbs and flags.
  bash: source <(felix completion bash)      (or save it in /etc/bash_completion.d/felix)
  zsh:  source <(felix completion zsh)       (or save it as _felix in a directory of $fpath)`

func runCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && cli.IsHelp(args[0]) {
		fmt.Fprintln(stdout, completionUsage)
		return exitOK
	}
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		fmt.Fprintln(stderr, completionUsage)
		return exitUsage
	}
	var cmds []cli.Command
	for _, c := range commands {
		cc := cli.Command{Name: c.name, Verbs: c.verbs}
		if c.flags != nil {
			cc.Flags = append(cli.FlagNames(c.flags()), "help")
		}
		cmds = append(cmds, cc)
	}
	if args[0] == "bash" {
		fmt.Fprint(stdout, cli.Bash("felix", cmds))
	} else {
		fmt.Fprint(stdout, cli.Zsh("felix", cmds))
	}
	return exitOK
}
