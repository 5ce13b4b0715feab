package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/cluster"
)

const adminStepDownUsage = `usage: felix admin shard step-down --tenant T [--namespace N] --stream S [--shard N] [--to MEMBER]
Hands the leadership of a replicated shard to the voter MEMBER (a broker's
node id), or without --to to the most caught up voter in sync. The shard's
members and their admin addresses come from the control plane's placement
(--controlplane, --token-file); the request goes to a member's admin API
(POST .../shards/N/step-down, with --admin-token-file's token, default the
control plane's), and a member that does not lead names the one that does,
which is asked next. Prints the answer: {"from", "leader"}.`

type stepDownFlags struct {
	cp                        *cpFlags
	tenant, namespace, stream string
	shard                     int
	to, adminTokenFile        string
}

// runShardStepDown runs felix admin shard step-down; args start with the verb.
func runShardStepDown(args []string, stdout, stderr io.Writer) int {
	set := flag.NewFlagSet("admin shard", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, adminStepDownUsage); set.PrintDefaults() }
	f := &stepDownFlags{cp: addCPFlags(set, true)}
	set.StringVar(&f.tenant, "tenant", "", "the stream's tenant `T`")
	set.StringVar(&f.namespace, "namespace", "default", "the stream's namespace `N`")
	set.StringVar(&f.stream, "stream", "", "the stream `S`")
	set.IntVar(&f.shard, "shard", 0, "the shard `N`")
	set.StringVar(&f.to, "to", "", "the voter `MEMBER` to hand the leadership to (default: the most caught up in sync)")
	set.StringVar(&f.adminTokenFile, "admin-token-file", "", "`FILE` with the bearer token of the brokers' admin API (default: the control plane's)")
	if len(args) == 0 || args[0] != "step-down" {
		set.Usage()
		return exitUsage
	}
	if err := set.Parse(args[1:]); err != nil {
		return exitUsage
	}
	err := f.cp.check()
	switch {
	case set.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", set.Arg(0))
	case f.tenant == "" || f.stream == "":
		err = errors.New("step-down needs --tenant and --stream")
	case f.shard < 0:
		err = errors.New("--shard must be >= 0")
	}
	if err != nil {
		fmt.Fprintln(stderr, "felix admin shard:", err)
		return exitUsage
	}
	ans, err := f.stepDown()
	if err != nil {
		fmt.Fprintln(stderr, "felix admin shard step-down:", err)
		return exitFail
	}
	out, _ := json.MarshalIndent(ans, "", "  ")
	stdout.Write(append(out, '\n'))
	return exitOK
}

// stepDown asks the shard's members, the preferred leader first, and
// follows a member's answer naming the leader.
func (f *stepDownFlags) stepDown() (broker.StepDownAnswer, error) {
	var p cluster.Placement
	if err := f.cp.call(http.MethodGet, "/v1/placement", nil, &p); err != nil {
		return broker.StepDownAnswer{}, err
	}
	want := cluster.Shard{Tenant: f.tenant, Namespace: f.namespace, Stream: f.stream, Shard: f.shard}
	i := slices.IndexFunc(p.Assignments, func(a cluster.Assignment) bool { return a.Shard == want })
	if i < 0 {
		return broker.StepDownAnswer{}, fmt.Errorf("the placement has no shard %s", want)
	}
	a := p.Assignments[i]
	if !a.Replicated() {
		return broker.StepDownAnswer{}, fmt.Errorf("shard %s is not replicated: it has no leader to step down", want)
	}
	tok, err := f.brokerToken()
	if err != nil {
		return broker.StepDownAnswer{}, err
	}
	admin := map[string]string{}
	for _, m := range p.Members {
		admin[m.ID] = m.AdminAddr
	}
	ask := append(slices.Clone(a.Voters), a.Replicas...)
	asked := map[string]bool{}
	var errs []error
	for len(ask) > 0 {
		id := ask[0]
		ask = ask[1:]
		if asked[id] {
			continue
		}
		asked[id] = true
		if admin[id] == "" {
			errs = append(errs, fmt.Errorf("%s: the placement gives no admin address", id))
			continue
		}
		ans, code, err := f.post(admin[id], tok)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		case code == http.StatusOK:
			return ans, nil
		case code == http.StatusConflict && ans.Leader != "":
			ask = append([]string{ans.Leader}, ask...) // the member it follows
		case code == http.StatusConflict:
			errs = append(errs, fmt.Errorf("%s: %s", id, ans.Error))
		default:
			return ans, fmt.Errorf("%s answered %d: %s", id, code, ans.Error)
		}
	}
	return broker.StepDownAnswer{}, fmt.Errorf("no member of %s leads it now: %w", want, errors.Join(errs...))
}

// post sends the step-down to the admin API at addr.
func (f *stepDownFlags) post(addr, tok string) (broker.StepDownAnswer, int, error) {
	var ans broker.StepDownAnswer
	body, _ := json.Marshal(broker.StepDownRequest{To: f.to})
	url := fmt.Sprintf("http://%s/v1/streams/%s/%s/%s/shards/%d/step-down", addr, f.tenant, f.namespace, f.stream, f.shard)
	// The broker answers once the new leader is known: up to an
	// election timeout or two on top of the request's own time.
	ctx, cancel := context.WithTimeout(context.Background(), f.cp.timeout+10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return ans, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ans, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return ans, 0, err
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		ans.Error = strings.TrimSpace(string(raw)) // an auth refusal: {"error"}, or not JSON at all
	}
	return ans, resp.StatusCode, nil
}

func (f *stepDownFlags) brokerToken() (string, error) {
	if f.adminTokenFile == "" {
		return f.cp.bearer()
	}
	tok, err := os.ReadFile(f.adminTokenFile)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	return strings.TrimSpace(string(tok)), nil
}
