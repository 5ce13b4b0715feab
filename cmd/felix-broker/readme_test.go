package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/testutil"
)

// readmeStep is what one command of the README's sh blocks must do.
type readmeStep struct {
	skip       string // why it is not run
	broker     bool   // make run: the broker, (re)started with the line's variables
	background bool   // its own terminal: it runs alongside the commands after it
	ready      string // background: stderr or stdout text that says it is ready
	ctrlC      bool   // background: it runs until Ctrl-C, sent once out matches
	out        string // stdout must match this regexp
	errOut     string // stderr must match this regexp
	files      []string
}

// readmeSteps holds every command of the README's sh blocks, as written;
// TestREADMECommands fails on a command missing here and on one here
// missing from the README, so that neither can rot.
var readmeSteps = map[string]readmeStep{
	"make run":  {broker: true},
	"make test": {skip: "it is CI, which runs this test"},

	"go run ./tools/felix sub --count 3": {background: true, ready: "following t1/default/demo shard 0 from latest",
		out: `^0 0 hello\n0 1 hello\n0 2 hello\n$`},
	"go run ./tools/felix pub --count 3 hello": {errOut: `^published 3 messages \(15 bytes\) in \S+\n$`},

	"go run ./tools/felix admin stream create orders --tenant t1 --namespace default --shards 2": {out: `"stream": "orders"`},
	"go run ./tools/felix pub --stream orders --ack --key customer-42 hello":                     {out: `^[01] 0\n$`},
	"go run ./tools/felix admin stream list":                                                     {out: `(?s)"demo".*"orders"`},

	`go run ./tools/felix roster join --roster lobby alice --meta '{"x":1}'`: {background: true, ctrlC: true,
		ready: "joined lobby as alice", out: `^joined lobby as alice\n$`},
	"go run ./tools/felix roster watch --roster lobby": {background: true, ctrlC: true, ready: "synced",
		out: `^member alice \{"x":1\}\nsynced 1\n$`},

	"go run ./tools/loadgen --profile throughput --duration 10s --json result.json": {out: `(?s)round.*msg/s`, files: []string{"result.json"}},
	"go run ./tools/felixtrace --interval 1s":                                       {background: true, ctrlC: true, ready: "STREAM", out: "t1/default/demo"},
	"go run ./tools/loadgen report result.json --svg chart.svg":                     {out: "Ingest throughput by publishers", files: []string{"chart.svg"}},

	"FELIX_DATA_DIR=/tmp/felix-data make run":                                              {broker: true},
	"go run ./tools/felix admin stream create jobs --shards 2 --durable --fsync on_commit": {out: `"durable": true`},
	"go run ./tools/felix pub --stream jobs --ack --count 3 --shard 0 work":                {out: `^0 0\n0 1\n0 2\n$`},
	"go run ./tools/felix queue consume --stream jobs --group workers --count 3 --ack":     {out: `^0 0 0 work\n0 1 0 work\n0 2 0 work\n$`},
	"go run ./tools/felix queue describe --stream jobs --group workers":                    {out: `^shard=0 committed=3 tail=3 lag=0 in_flight=0 owed=0 dead_letters=0 `},
	"go run ./tools/felix admin stream info jobs":                                          {out: `(?s)"next_offset": 3.*"group": "workers".*"lag": 0`},
	"go run ./tools/felix log verify /tmp/felix-data/t1_default_jobs_0-*":                  {out: `^ok \S+t1_default_jobs_0-[0-9a-f]+: 1 segments, records \[0, 3\)`},
	"go run ./tools/felix log dump /tmp/felix-data/t1_default_jobs_0-* --json":             {out: `(?s)"offset":0.*"offset":2,"payload":"work"`},

	"go run ./tools/felix cache put --cache demo greeting hello --ttl 5m": {},
	"go run ./tools/felix cache get --cache demo greeting":                {out: `^hello\n$`},
	"go run ./tools/felix counter add --cache demo hits 5":                {out: `^5\n$`},
	"go run ./tools/felix cache put --cache demo lock me --if-absent":     {out: `^applied \d+\n$`},
	"go run ./tools/felix watch --cache demo greeting --current": {background: true, ctrlC: true, ready: "put hello",
		out: `^\d+ put hello\n\d+ delete\n$`},
	"go run ./tools/felix cache del --cache demo greeting": {out: `^deleted\n$`},
}

// TestREADMECommands runs the README's sh blocks as written against a real
// broker process, in order, each command in a shell, and checks what each
// prints. The liberties: `go run ./tools/X` runs a binary built once,
// `make run` runs this test binary as the broker on free ports (the tools
// find it through FELIX_DEV_DIR's broker.json, as they find any local
// broker), /tmp/felix-dev and /tmp/felix-data are directories of the
// test's own, and the load test runs 1 s, not 10 s.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tools and runs the README against a broker process")
	}
	blocks := readmeBlocks(t, "../../README.md")
	seen := map[string]bool{}
	for _, b := range blocks {
		for _, line := range b {
			_, ok := readmeSteps[line]
			require.True(t, ok, "README command %q has no entry in readmeSteps: say what it must do", line)
			seen[line] = true
		}
	}
	for line := range readmeSteps {
		require.True(t, seen[line], "readmeSteps has %q, which the README no longer runs", line)
	}

	r := newReadmeRun(t)
	for i, b := range blocks {
		r.block(t, i, b)
	}
	r.stopBroker(t)
}

// readmeBlocks are the commands of each ```sh block, without comments.
func readmeBlocks(t *testing.T, path string) [][]string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var blocks [][]string
	var cur []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && line == "```sh":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			if cmd, _, _ := strings.Cut(line, " #"); strings.TrimSpace(cmd) != "" {
				cur = append(cur, strings.TrimSpace(cmd))
			}
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, blocks)
	return blocks
}

type readmeRun struct {
	work, dev, data string
	bins            map[string]string // "./tools/felix" -> binary
	env             []string
	broker          *exec.Cmd
	brokerEnv       string
	brokerDone      chan error
}

func newReadmeRun(t *testing.T) *readmeRun {
	root := t.TempDir()
	r := &readmeRun{work: filepath.Join(root, "work"), dev: filepath.Join(root, "dev"), data: filepath.Join(root, "data"),
		bins: map[string]string{}}
	require.NoError(t, os.Mkdir(r.work, 0o755))
	for _, tool := range []string{"felix", "loadgen", "felixtrace"} {
		r.bins["./tools/"+tool] = testutil.GoBuild(t, "github.com/felixmq/felix/tools/"+tool)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FELIX_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "FELIX_DEV_DIR="+r.dev, "XDG_CONFIG_HOME="+filepath.Join(root, "config"))
	t.Cleanup(func() {
		if r.broker != nil {
			r.broker.Process.Kill()
		}
	})
	return r
}

// rewrite is line with the test's liberties taken.
func (r *readmeRun) rewrite(line string) string {
	for src, bin := range r.bins {
		line = strings.ReplaceAll(line, "go run "+src+" ", bin+" ")
	}
	return strings.NewReplacer("/tmp/felix-data", r.data, "/tmp/felix-dev", r.dev, "--duration 10s", "--duration 1s").Replace(line)
}

// block runs one sh block: its background commands are stopped (or
// waited for) at its end.
func (r *readmeRun) block(t *testing.T, n int, lines []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var bg []*readmeProc
	for _, line := range lines {
		st := readmeSteps[line]
		switch {
		case st.skip != "":
			continue
		case st.broker:
			env, _ := strings.CutSuffix(line, "make run")
			r.startBroker(t, r.rewrite(strings.TrimSpace(env)))
			continue
		}
		p := r.start(t, ctx, line, st)
		if !st.background {
			r.finish(t, p)
			continue
		}
		require.NoError(t, p.awaitAny(ctx, st.ready), "block %d: %q never printed %q:\n%s", n, line, st.ready, p)
		bg = append(bg, p)
	}
	for _, p := range bg {
		if p.step.ctrlC {
			require.NoError(t, p.stdout.await(ctx, p.step.out), "block %d: %q:\n%s", n, p.line, p)
		}
	}
	// Last started, first stopped: a watcher sees nothing of what it
	// watches ending (the roster watch would print alice's leave).
	for _, p := range slices.Backward(bg) {
		if p.step.ctrlC {
			p.cmd.Process.Signal(syscall.SIGINT)
			r.finish(t, p)
		}
	}
	for _, p := range bg {
		if !p.step.ctrlC {
			r.finish(t, p)
		}
	}
}

// readmeProc is one command running.
type readmeProc struct {
	line           string
	step           readmeStep
	cmd            *exec.Cmd
	stdout, stderr *awaitBuffer
	done           chan error
}

func (p *readmeProc) String() string {
	return "stdout:\n" + p.stdout.String() + "\nstderr:\n" + p.stderr.String()
}

func (r *readmeRun) start(t *testing.T, ctx context.Context, line string, st readmeStep) *readmeProc {
	p := &readmeProc{line: line, step: st, stdout: newAwaitBuffer(), stderr: newAwaitBuffer(), done: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, "sh", "-c", "exec "+r.rewrite(line))
	p.cmd.Dir, p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = r.work, r.env, p.stdout, p.stderr
	require.NoError(t, p.cmd.Start(), line)
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// finish waits for p and checks its exit status, output and files.
func (r *readmeRun) finish(t *testing.T, p *readmeProc) {
	err := <-p.done
	require.NoError(t, err, "%q:\n%s", p.line, p)
	require.Regexp(t, p.step.out, p.stdout.String(), p.line)
	require.Regexp(t, p.step.errOut, p.stderr.String(), p.line)
	for _, f := range p.step.files {
		require.FileExists(t, filepath.Join(r.work, f), p.line)
	}
}

// awaitAny waits until stdout or stderr holds text.
func (p *readmeProc) awaitAny(ctx context.Context, text string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	for _, b := range []*awaitBuffer{p.stdout, p.stderr} {
		go func() { errc <- b.await(ctx, regexp.QuoteMeta(text)) }()
	}
	select {
	case err := <-errc:
		return err
	case err := <-p.done:
		p.done <- err // for finish
		return fmt.Errorf("exited before it was ready: %v", err)
	}
}

// startBroker (re)starts the broker with env ("A=B C=D") when it does not
// run with it already, and waits until it serves.
func (r *readmeRun) startBroker(t *testing.T, env string) {
	if r.broker != nil && r.brokerEnv == env {
		return
	}
	r.stopBroker(t)
	vars := append([]string{"FELIX_QUIC_BIND=" + freeAddr(t, "udp"), "FELIX_ADMIN_BIND=" + freeAddr(t, "tcp"),
		"FELIX_DEV_DIR=" + r.dev, "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0"}, strings.Fields(env)...)
	cmd := brokerCmd(t, vars)
	logs := newAwaitBuffer()
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	r.broker, r.brokerEnv, r.brokerDone = cmd, env, make(chan error, 1)
	go func() { r.brokerDone <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, logs.await(ctx, "felix-broker ready"), "broker:\n%s", logs)
}

// stopBroker ends the broker as Ctrl-C does.
func (r *readmeRun) stopBroker(t *testing.T) {
	if r.broker == nil {
		return
	}
	require.NoError(t, r.broker.Process.Signal(syscall.SIGINT))
	select {
	case err := <-r.brokerDone:
		require.NoError(t, err, "the broker's exit")
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not stop on SIGINT")
	}
	r.broker = nil
}

// awaitBuffer is an output that can be waited on.
type awaitBuffer struct {
	mu      sync.Mutex
	buf     strings.Builder
	changed chan struct{} // closed and replaced by each Write
}

func newAwaitBuffer() *awaitBuffer { return &awaitBuffer{changed: make(chan struct{})} }

func (b *awaitBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

func (b *awaitBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// await waits until the content matches pattern, or ctx ends.
func (b *awaitBuffer) await(ctx context.Context, pattern string) error {
	re := regexp.MustCompile(pattern)
	for {
		b.mu.Lock()
		ok, changed := re.MatchString(b.buf.String()), b.changed
		b.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("no %q within the block's time", pattern)
		}
	}
}
