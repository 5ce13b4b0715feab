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
)

const tokenUsage = `usage: felix token exchange --controlplane URL --tenant T --idp-token FILE [--out FILE] [--actions a,b]
       felix token mint [--controlplane URL] --token-file BOOTSTRAP --tenant T --subject S --grant ACTION[:RESOURCE]... [--out FILE]
       felix token node [--controlplane URL] --token-file CREDENTIAL --subject BROKER_ID [--out FILE]

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
		case "exchange":
			return tokenExchange(args[1:], stdout, stderr)
		case "mint":
			return tokenMint(args[1:], stdout, stderr)
		case "node":
			return tokenNode(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, tokenUsage)
	return exitUsage
}

// tokenFlags are the flags both token commands share.
type tokenFlags struct {
	set             *flag.FlagSet
	cp              *cpFlags
	tenant, outFile *string
}

func newTokenFlags(name string, withToken bool, stderr io.Writer) tokenFlags {
	set := flag.NewFlagSet(name, flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, tokenUsage); set.PrintDefaults() }
	return tokenFlags{set: set, cp: addCPFlags(set, withToken), tenant: set.String("tenant", "", "tenant `T` the token belongs to"),
		outFile: set.String("out", "", "write the Felix token to `FILE` instead of stdout")}
}

func tokenExchange(args []string, stdout, stderr io.Writer) int {
	tf := newTokenFlags("token exchange", false, stderr)
	set, cp, tenant, outFile := tf.set, tf.cp, tf.tenant, tf.outFile
	idpFile := set.String("idp-token", "", "`FILE` holding the IdP token (- for stdin)")
	actions := set.String("actions", "", "comma list narrowing the granted actions")
	if err := set.Parse(args); err != nil {
		return exitUsage
	}
	if err := cp.check(); err != nil || *tenant == "" || *idpFile == "" || set.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("--tenant and --idp-token are required, and no arguments")
		}
		fmt.Fprintln(stderr, "felix token exchange:", err)
		return exitUsage
	}
	idp, err := readTokenFile(*idpFile)
	if err != nil {
		fmt.Fprintln(stderr, "felix token exchange: --idp-token:", err)
		return exitFail
	}
	req := api.ExchangeRequest{Tenant: *tenant, IdPToken: idp}
	for _, a := range splitComma(*actions) {
		req.Actions = append(req.Actions, auth.Action(a))
	}
	return issue("exchange", cp, "/v1/token/exchange", req, *outFile, stdout, stderr)
}

// bootstrapURL is the bootstrap listener's default address
// (FELIX_CP_BOOTSTRAP_BIND), where the development issuer is served.
const bootstrapURL = "http://127.0.0.1:7071"

func tokenMint(args []string, stdout, stderr io.Writer) int {
	tf := newTokenFlags("token mint", true, stderr)
	set, cp, tenant, outFile := tf.set, tf.cp, tf.tenant, tf.outFile
	subject := set.String("subject", "", "who the token is for (`S`, its sub)")
	var grants []string
	set.Func("grant", "a right, `ACTION[:RESOURCE]` (repeatable; RESOURCE defaults to T/*/*)", func(v string) error {
		grants = append(grants, v)
		return nil
	})
	err := tf.parseOnBootstrap(args)
	if errors.Is(err, flag.ErrHelp) {
		return exitUsage
	}
	if err == nil && (*tenant == "" || *subject == "" || len(grants) == 0 || set.NArg() > 0) {
		err = fmt.Errorf("--tenant, --subject and at least one --grant are required, and no arguments")
	}
	if err != nil {
		fmt.Fprintln(stderr, "felix token mint:", err)
		return exitUsage
	}
	req := api.MintRequest{Tenant: *tenant, Subject: *subject}
	for _, g := range grants {
		action, resource, ok := strings.Cut(g, ":")
		if !ok {
			resource = *tenant + "/*/*"
		}
		req.Permissions = append(req.Permissions, auth.Permission{Action: auth.Action(action), Resource: resource})
	}
	return issue("mint", cp, "/v1/token/mint", req, *outFile, stdout, stderr)
}

func tokenNode(args []string, stdout, stderr io.Writer) int {
	tf := newTokenFlags("token node", true, stderr)
	subject := tf.set.String("subject", "", "the broker's FELIX_NODE_ID (`BROKER_ID`, the credential's sub)")
	if err := tf.parseOnBootstrap(args); err != nil || *subject == "" || tf.set.NArg() > 0 {
		if err == nil {
			err = errors.New("--subject is required, and no arguments")
		}
		fmt.Fprintln(stderr, "felix token node:", err)
		return exitUsage
	}
	return issue("node", tf.cp, "/v1/token/node", api.NodeTokenRequest{Subject: *subject}, *tf.outFile, stdout, stderr)
}

// parseOnBootstrap parses args; without --controlplane the request goes to
// the bootstrap listener's default address.
func (tf tokenFlags) parseOnBootstrap(args []string) error {
	if err := tf.set.Parse(args); err != nil {
		return err
	}
	explicit := false
	tf.set.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "controlplane" })
	if !explicit {
		tf.cp.url = bootstrapURL
	}
	return tf.cp.check()
}

// issue posts req to path and prints or writes the Felix token it answers.
func issue(verb string, cp *cpFlags, path string, req any, outFile string, stdout, stderr io.Writer) int {
	var resp api.ExchangeResponse
	if err := cp.call("POST", path, req, &resp); err != nil {
		fmt.Fprintf(stderr, "felix token %s: %v\n", verb, err)
		return exitFail
	}
	if outFile != "" {
		if err := os.WriteFile(outFile, []byte(resp.Token+"\n"), 0o600); err != nil {
			fmt.Fprintf(stderr, "felix token %s: --out: %v\n", verb, err)
			return exitFail
		}
	} else {
		fmt.Fprintln(stdout, resp.Token)
	}
	fmt.Fprintln(stderr, "expires_at", resp.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
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
