package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/testutil"
)

// cliPairRunsEnv is how many times TestCLISubscriberLosesNothingOnADefaultBroker
// runs its first pair (the second half as often): 3 in make test, 20 in
// make reliability.
const cliPairRunsEnv = "FELIX_CLI_PAIR_RUNS"

// A new user's first two tries, on the real binaries and a broker with its
// defaults: `felix sub --count N` in one terminal, `felix pub` in another.
// The subscriber reads as fast as it can, so it gets every event, in order,
// and ends with status 0 (a loss would end it with 3, never leave it
// waiting):
//   - 5,000 × 256 B acked, the subscriber writing to a file;
//   - 40,000 × 4 KiB fire-and-forget, the subscriber writing to /dev/null.
func TestCLISubscriberLosesNothingOnADefaultBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the felix CLI and runs broker processes")
	}
	felix := testutil.GoBuild(t, "github.com/felixmq/felix/tools/felix")
	runs := 3
	if s := os.Getenv(cliPairRunsEnv); s != "" {
		var err error
		runs, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	for _, pc := range []cliPair{
		{name: "5000x256B-acked-to-file", count: 5000, size: 256, ack: true, toFile: true, runs: runs},
		{name: "40000x4KiB-fire-and-forget-to-devnull", count: 40000, size: 4096, runs: max(runs/2, 2)},
	} {
		t.Run(pc.name, func(t *testing.T) {
			for i := range pc.runs {
				took := pc.run(t, felix)
				t.Logf("run %d: %d events in %v", i+1, pc.count, took.Round(time.Millisecond))
			}
		})
	}
}

type cliPair struct {
	name        string
	count, size int
	ack, toFile bool
	runs        int
}

// run starts a fresh default broker, the subscriber, waits until the broker
// has its subscription, publishes, and checks what the subscriber got.
func (pc cliPair) run(t *testing.T, felix string) time.Duration {
	bp := startBrokerProcess(t, "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0")
	env := cliEnv(filepath.Dir(bp.cert))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := os.DevNull
	if pc.toFile {
		out = filepath.Join(t.TempDir(), "out.txt")
	}
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	sub := exec.CommandContext(ctx, felix, "sub", "--addr", bp.addr, "--count", strconv.Itoa(pc.count))
	var subErr strings.Builder
	sub.Env, sub.Stdout, sub.Stderr = env, f, &subErr
	start := time.Now()
	require.NoError(t, sub.Start())
	require.Eventually(t, func() bool { return demoSubscribers(bp.admin) == 1 }, 20*time.Second, 5*time.Millisecond)

	args := []string{"pub", "--addr", bp.addr, "--count", strconv.Itoa(pc.count), "--size", strconv.Itoa(pc.size)}
	if pc.ack {
		args = append(args, "--ack")
	}
	pub := exec.CommandContext(ctx, felix, args...)
	pub.Env = env
	pubOut, err := pub.CombinedOutput()
	require.NoError(t, err, "felix pub: %s", pubOut)
	require.NoError(t, sub.Wait(), "felix sub: %s", subErr.String())
	took := time.Since(start)
	require.NotContains(t, subErr.String(), "GAP")
	if pc.toFile {
		requireOffsetsInOrder(t, out, pc.count)
	}
	return took
}

// cliEnv is the environment of a CLI that finds the broker through devDir
// only (no token from this process's environment).
func cliEnv(devDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, devdir.TokenEnv+"=") && !strings.HasPrefix(kv, devdir.DirEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, devdir.DirEnv+"="+devDir)
}

// demoSubscribers is the subscriber count of t1/default/demo shard 0 in the
// broker's stats, -1 when it cannot tell.
func demoSubscribers(admin string) int {
	resp, err := http.Get("http://" + admin + "/debug/felix/stats")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Streams []struct {
			Stream string `json:"stream"`
			Shards []struct {
				Subscribers int `json:"subscribers"`
			} `json:"shard_stats"`
		} `json:"streams"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return -1
	}
	for _, s := range st.Streams {
		if s.Stream == "demo" && len(s.Shards) > 0 {
			return s.Shards[0].Subscribers
		}
	}
	return -1
}

// requireOffsetsInOrder checks that path holds lines "SHARD OFFSET
// PAYLOAD" for offsets 0..n-1 of shard 0, in order.
func requireOffsetsInOrder(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	want := 0
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 3)
		require.Len(t, fields, 3, fmt.Sprintf("line %d", want+1))
		require.Equal(t, []string{"0", strconv.Itoa(want)}, fields[:2], fmt.Sprintf("line %d", want+1))
		want++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, n, want)
}
