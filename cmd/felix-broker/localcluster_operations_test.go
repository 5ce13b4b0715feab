package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// operationsWalkthrough runs the shell block of docs/operations.md, "Try it
// on one machine", as written, on the cluster scripts/cluster.sh started in
// dir: a replicated stream through a rolling restart of the three brokers
// (scripts/cluster.sh restart) and felix admin shard step-down, every
// event published read back once.
func operationsWalkthrough(t *testing.T, dir string, base int) {
	block := docBlock(t, "../../docs/operations.md", "### Try it on one machine")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), fmt.Sprintf("CLUSTER_PORT_BASE=%d", base), "CLUSTER_DIR="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "the walk-through of docs/operations.md:\n%s\n%s", out, stderr.String())
	for n := 1; n <= 3; n++ {
		require.Contains(t, stderr.String(), fmt.Sprintf("broker-%d is back and every replicated shard is in sync", n))
	}

	events := regexp.MustCompile(`(?m)^0 \d+ (before|after broker-[123])$`).FindAllStringSubmatch(string(out), -1)
	require.Len(t, events, 400, "felix sub reads every event once:\n%s", out)
	count := map[string]int{}
	for _, e := range events {
		count[e[1]]++
	}
	require.Equal(t, map[string]int{"before": 100, "after broker-1": 100, "after broker-2": 100, "after broker-3": 100}, count)

	var stepped struct{ From, Leader string }
	start := strings.Index(string(out), `"from"`)
	require.GreaterOrEqual(t, start, 0, "felix admin shard step-down prints its answer:\n%s", out)
	require.NoError(t, json.NewDecoder(strings.NewReader("{"+string(out)[start:])).Decode(&stepped))
	require.NotEmpty(t, stepped.Leader)
	require.NotEqual(t, stepped.From, stepped.Leader)
}

// docBlock is the first ```sh block after the line heading in the
// Markdown file path.
func docBlock(t *testing.T, path, heading string) string {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	require.True(t, ok, "%s has no %q", path, heading)
	_, rest, ok = strings.Cut(rest, "\n```sh\n")
	require.True(t, ok, "%s: no sh block after %q", path, heading)
	block, _, ok := strings.Cut(rest, "\n```\n")
	require.True(t, ok)
	return block
}
