package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

const tokenUsage = `usage: felix token exchange --controlplane URL --tenant T --idp-token FILE [--out FILE] [--actions a,b]
Exchanges an identity provider's token (read from FILE, "-" for stdin) for a
Felix token, printed on stdout or written to --out (mode 0600). The expiry
goes to stderr. A refusal prints the control plane's code (expired,
audience, issuer, signature, algorithm, jwks_unavailable, forbidden, ...)
and exits 1.`

func runToken(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "exchange" {
		fmt.Fprintln(stderr, tokenUsage)
		return exitUsage
	}
	set := flag.NewFlagSet("token exchange", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, tokenUsage); set.PrintDefaults() }
	cp := addCPFlags(set, false)
	tenant := set.String("tenant", "", "tenant `T`")
	idpFile := set.String("idp-token", "", "`FILE` holding the IdP token (- for stdin)")
	outFile := set.String("out", "", "write the Felix token to `FILE` instead of stdout")
	actions := set.String("actions", "", "comma list narrowing the granted actions")
	if err := set.Parse(args[1:]); err != nil {
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
	var resp api.ExchangeResponse
	if err := cp.call("POST", "/v1/token/exchange", req, &resp); err != nil {
		fmt.Fprintln(stderr, "felix token exchange:", err)
		return exitFail
	}
	if *outFile != "" {
		if err := os.WriteFile(*outFile, []byte(resp.Token+"\n"), 0o600); err != nil {
			fmt.Fprintln(stderr, "felix token exchange: --out:", err)
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
