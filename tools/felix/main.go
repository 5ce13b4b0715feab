// Command felix is the Felix command-line tool. Each subcommand lives in its
// own file and registers in the commands table below.
package main

import (
	"fmt"
	"io"
	"os"
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
// tests can call it directly.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is the dispatch table; add new subcommands here.
var commands = []command{
	{name: "wire", summary: "check vector files and decode wire v1 frames", run: runWire},
	{name: "pub", summary: "publish messages to a stream", run: runPub}, {name: "sub", summary: "print a stream's events", run: runSub},
	{name: "log", summary: "verify, dump and stat a shard's log directory offline", run: runLog},
	{name: "cache", summary: "put, get and delete cache keys", run: runCache},
	{name: "counter", summary: "add to and read counters", run: runCounter},
	{name: "watch", summary: "print every change of a cache key", run: runWatch},
	{name: "roster", summary: "join a roster (until interrupted) or watch its members", run: runRoster},
	{name: "queue", summary: "consume a durable stream as a member of a consumer group", run: runQueue},
	{name: "token", summary: "exchange an identity provider's token for a Felix token, or mint one (development issuer)", run: runToken},
	{name: "probe", summary: "exit 0 if a health endpoint answers 2xx (container health checks)", run: runProbe},
	{name: "cert", summary: "make a development CA and sign broker certificates", run: runCert},
	{name: "admin", summary: "create, list and delete tenants, namespaces, streams and caches; list and move replicated shards", run: runAdmin},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return exitUsage
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "felix: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: felix COMMAND [ARGS]")
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}
