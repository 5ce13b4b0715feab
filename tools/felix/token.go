package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/cli"
)

const tokenUsage = `usage: felix token exchange --controlplane URL --tenant T --idp-token FILE [--out FILE] [--actions a,b]
       felix token mint [--controlplane URL] --token-file BOOTSTRAP --tenant T --subject S --grant ACTION[:RESOURCE]... [--out FILE]
       felix token node [--controlplane URL] --token-file CREDENTIAL --subject BROKER_ID [--out FILE]
(every verb also takes --json)

exchange: trades an identity provider's token (read from FILE, "-" for
stdin) for a Felix token.

mint: asks the control plane's development issuer (its bootstrap listener,
default http://127.0.0.1:7071, with the bootstrap token) for a Felix token
of tenant T for subject S carrying exactly the --grant rights, with no
identity provider. RESOURCE is tenant/namespace/name with * allowed, and
defaults to T/*/* (e.g. --grant stream.publish --grant
stream.subscribe:T/default/orders).

node: mints a broker's node credential (FELIX_NODE_TOKEN_FILE) with the
bootstrap token on the bootstrap listener (default http://127.0.0.1:7071),
or an operator admin's token on the main one.

All print the token on stdout or write it to --out (mode 0600), and the
expiry on stderr. A refusal prints the control plane's code (expired,
audience, issuer, signature, algorithm, jwks_unavailable, forbidden,
not_found, ...) and exits 1.`

func runToken(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "exchange", "mint", "node":
			return tokenCmd(args[0], args[1:], stdout, stderr)
		}
		if cli.IsHelp(args[0]) {
			return cli.Fail(cli.ErrHelp, "felix token", tokenUsage, nil, stdout, stderr)
		}
	}
	if len(args) == 0 {
		cli.PrintUsage(stderr, tokenUsage, nil)
		return exitUsage
	}
	return cli.Fail(errors.New("want exchange, mint or node"), "felix token", tokenUsage, nil, stdout, stderr)
}

// tokenFlags are the flags of the token commands; each verb registers its
// own ("" every one, for completion).
type tokenFlags struct {
	cp                                         *cpFlags
	tenant, outFile, idpFile, actions, subject string
	grants                                     []string
	json                                       bool
}

func newTokenFlags(verb string) (*flag.FlagSet, *tokenFlags) {
	set := flag.NewFlagSet("felix token "+verb, flag.ContinueOnError)
	f := &tokenFlags{cp: addCPFlags(set, verb != "exchange")}
	set.StringVar(&f.outFile, "out", "", "write the Felix token to `FILE` (mode 0600) instead of stdout")
	set.BoolVar(&f.json, "json", false, `print {"token":...,"expires_at":...} on stdout`)
	if verb != "node" {
		set.StringVar(&f.tenant, "tenant", "", "tenant `T` the token belongs to")
	}
	if verb == "exchange" || verb == "" {
		set.StringVar(&f.idpFile, "idp-token", "", "`FILE` holding the IdP token (- for stdin)")
		set.StringVar(&f.actions, "actions", "", "comma list narrowing the granted actions")
	}
	if verb != "exchange" {
		set.StringVar(&f.subject, "subject", "", "who the token is for (`S`, its sub; node: the broker's FELIX_NODE_ID)")
	}
	if verb == "mint" || verb == "" {
		set.Func("grant", "a right, `ACTION[:RESOURCE]` (repeatable; RESOURCE defaults to T/*/*)", func(v string) error {
			f.grants = append(f.grants, v)
			return nil
		})
	}
	return set, f
}

// tokenFlagSet is every token flag, for completion.
func tokenFlagSet() *flag.FlagSet { s, _ := newTokenFlags(""); return s }

func tokenCmd(verb string, args []string, stdout, stderr io.Writer) int {
	set, f := newTokenFlags(verb)
	pos, err := cli.Parse(set, args)
	if err == nil && len(pos) > 0 {
		err = fmt.Errorf("unexpected argument %q (flags only)", pos[0])
	}
	if err == nil && verb != "exchange" {
		// Without --controlplane, mint and node go to the bootstrap
		// listener's default address, where the issuer is.
		explicit := false
		set.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "controlplane" })
		if !explicit {
			f.cp.url = bootstrapURL
		}
	}
	if err == nil {
		err = f.cp.check()
	}
	if err == nil {
		err = f.required(verb)
	}
	if err != nil {
		return cli.Fail(err, "felix token "+verb, tokenUsage, set, stdout, stderr)
	}
	var req any
	path := "/v1/token/" + verb
	switch verb {
	case "exchange":
		idp, err := readTokenFile(f.idpFile)
		if err != nil {
			fmt.Fprintln(stderr, "felix token exchange: --idp-token:", err)
			return exitFail
		}
		r := api.ExchangeRequest{Tenant: f.tenant, IdPToken: idp}
		for _, a := range splitComma(f.actions) {
			r.Actions = append(r.Actions, auth.Action(a))
		}
		req = r
	case "mint":
		r := api.MintRequest{Tenant: f.tenant, Subject: f.subject}
		for _, g := range f.grants {
			action, resource, ok := strings.Cut(g, ":")
			if !ok {
				resource = f.tenant + "/*/*"
			}
			r.Permissions = append(r.Permissions, auth.Permission{Action: auth.Action(action), Resource: resource})
		}
		req = r
	case "node":
		req = api.NodeTokenRequest{Subject: f.subject}
	}
	return issue(verb, f, path, req, stdout, stderr)
}

// required checks what verb cannot do without.
func (f *tokenFlags) required(verb string) error {
	switch {
	case verb == "exchange" && (f.tenant == "" || f.idpFile == ""):
		return errors.New("--tenant and --idp-token are required")
	case verb == "mint" && (f.tenant == "" || f.subject == "" || len(f.grants) == 0):
		return errors.New("--tenant, --subject and at least one --grant are required")
	case verb == "node" && f.subject == "":
		return errors.New("--subject is required")
	}
	return nil
}

// bootstrapURL is the bootstrap listener's default address
// (FELIX_CP_BOOTSTRAP_BIND), where the development issuer is served.
const bootstrapURL = "http://127.0.0.1:7071"

// issue posts req to path and prints or writes the Felix token it answers.
func issue(verb string, f *tokenFlags, path string, req any, stdout, stderr io.Writer) int {
	var resp api.ExchangeResponse
	if err := f.cp.call("POST", path, req, &resp); err != nil {
		fmt.Fprintf(stderr, "felix token %s: %v\n", verb, err)
		return exitFail
	}
	expires := resp.ExpiresAt.Format("2006-01-02T15:04:05Z07:00")
	switch {
	case f.outFile != "":
		if err := os.WriteFile(f.outFile, []byte(resp.Token+"\n"), 0o600); err != nil {
			fmt.Fprintf(stderr, "felix token %s: --out: %v\n", verb, err)
			return exitFail
		}
		if f.json {
			writeJSONLine(stdout, map[string]any{"file": f.outFile, "expires_at": expires})
		}
	case f.json:
		writeJSONLine(stdout, map[string]any{"token": resp.Token, "expires_at": expires})
	default:
		fmt.Fprintln(stdout, resp.Token)
	}
	if !f.json {
		fmt.Fprintln(stderr, "expires_at", expires)
	}
	return exitOK
}

func readTokenFile(path string) (string, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
