package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/internal/endpoint"
)

const contextUsage = `usage: felix context save NAME [--addr H:P] [--admin H:P] [--controlplane URL] [--ca FILE] [--token-file FILE] [--tenant T] [--use]
       felix context use NAME        make NAME the context every tool uses (--none: none)
       felix context list            the saved contexts, * marking the one in use
       felix context show [NAME]     where the tools connect now, and why (or NAME's settings)
       felix context rm NAME
A context names a broker's addresses and the credentials for it, as
nats context does. The tools (felix, felix-loadgen, felixtrace) take each
setting from their flag, else the environment (FELIX_ADDR, FELIX_ADMIN,
FELIX_CONTROLPLANE, FELIX_CA, FELIX_TENANT, FELIX_TOKEN), else the context
in effect (FELIX_CONTEXT, else the one "use" selected), else what a local
broker wrote into its dev directory (FELIX_DEV_DIR), else the defaults of
make run. Contexts live in $XDG_CONFIG_HOME/felix (else ~/.config/felix).
--json prints list and show as JSON.`

var contextVerbs = []string{"save", "use", "list", "show", "rm"}

type contextFlags struct {
	ctx       endpoint.Context
	use, none bool
	json      bool
}

func newContextFlags() (*flag.FlagSet, *contextFlags) {
	set := flag.NewFlagSet("felix context", flag.ContinueOnError)
	f := &contextFlags{}
	set.StringVar(&f.ctx.Addr, "addr", "", "save: the broker's QUIC `host:port`")
	set.StringVar(&f.ctx.Admin, "admin", "", "save: the broker's admin `host:port` or URL")
	set.StringVar(&f.ctx.ControlPlane, "controlplane", "", "save: the control plane's `URL`")
	set.StringVar(&f.ctx.CA, "ca", "", "save: PEM `FILE` of certificates to trust")
	set.StringVar(&f.ctx.TokenFile, "token-file", "", "save: `FILE` holding the token")
	set.StringVar(&f.ctx.Tenant, "tenant", "", "save: tenant `T`")
	set.BoolVar(&f.use, "use", false, "save: and use it")
	set.BoolVar(&f.none, "none", false, "use: no context")
	set.BoolVar(&f.json, "json", false, "list, show: print JSON")
	return set, f
}

func runContext(args []string, stdout, stderr io.Writer) int {
	set, f := newContextFlags()
	pos, err := cli.Parse(set, args)
	if err == nil && (len(pos) == 0 || !slices.Contains(contextVerbs, pos[0])) {
		err = errors.New("want save, use, list, show or rm")
	}
	if err != nil {
		return cli.Fail(err, "felix context", contextUsage, set, stdout, stderr)
	}
	verb, names := pos[0], pos[1:]
	st := endpoint.StoreFor(os.LookupEnv)
	switch {
	case verb == "list" || verb == "show" && len(names) == 0 || verb == "use" && f.none:
		if len(names) > 0 {
			err = fmt.Errorf("%s takes no NAME", verb)
		}
	case len(names) != 1:
		err = fmt.Errorf("%s takes one NAME", verb)
	}
	if err != nil {
		return cli.Fail(err, "felix context", contextUsage, set, stdout, stderr)
	}
	switch verb {
	case "save":
		err = st.Save(names[0], f.ctx)
		if err == nil && f.use {
			err = st.Select(names[0])
		}
	case "use":
		if f.none {
			err = st.Select("")
		} else {
			err = st.Select(names[0])
		}
	case "rm":
		err = st.Remove(names[0])
	case "list":
		err = listContexts(st, f.json, stdout)
	case "show":
		err = showContext(st, names, f.json, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix context %s: %v\n", verb, err)
		return exitFail
	}
	return exitOK
}

func listContexts(st endpoint.Store, asJSON bool, stdout io.Writer) error {
	names, err := st.List()
	if err != nil {
		return err
	}
	inUse := st.Selected()
	if v, ok := os.LookupEnv(endpoint.ContextEnv); ok && v != "" {
		inUse = v
	}
	if asJSON {
		return writeJSONLine(stdout, map[string]any{"contexts": append([]string{}, names...), "in_use": inUse})
	}
	for _, n := range names {
		mark := " "
		if n == inUse {
			mark = "*"
		}
		fmt.Fprintf(stdout, "%s %s\n", mark, n)
	}
	return nil
}

// showContext prints a saved context's settings, or (no name) where the
// tools connect now, with where each setting comes from.
func showContext(st endpoint.Store, names []string, asJSON bool, stdout io.Writer) error {
	if len(names) == 1 {
		c, err := st.Load(names[0])
		if err != nil {
			return err
		}
		return writeJSONLine(stdout, c)
	}
	ep, err := resolve()
	if err != nil {
		return err
	}
	rows := []struct {
		name string
		v    endpoint.Value
	}{{"addr", ep.Addr}, {"admin", ep.Admin}, {"controlplane", ep.ControlPlane}, {"ca", ep.CA}, {"token_file", ep.TokenFile}, {"tenant", ep.Tenant}}
	if asJSON {
		obj := map[string]any{"context": ep.Context}
		for _, r := range rows {
			obj[r.name] = map[string]string{"value": r.v.V, "from": r.v.From}
		}
		return writeJSONLine(stdout, obj)
	}
	if ep.Context != "" {
		fmt.Fprintf(stdout, "%-13s %s\n", "context", ep.Context)
	}
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-13s %-40s (%s)\n", r.name, r.v.V, r.v.From)
	}
	return nil
}
