package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// replicationWalkthrough runs docs/cluster.md, "Run a three-broker cluster
// on this machine", on the cluster scripts/cluster.sh started in dir: an
// RF=3 quorum stream created with felix admin, its leader shown by felix
// admin stream shards, a publish through a broker that does not lead, the
// leader killed with scripts/cluster.sh kill and another elected, a
// publish after it, felix sub reading every event with the offsets skipping
// each term's start, and the killed broker started again catching up.
func replicationWalkthrough(t *testing.T, dir string, base int, token string, brokers []string, script func(verb ...string) (string, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	felix := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "bin", "felix"), args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("felix %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out), err
	}
	cp := []string{"--controlplane", fmt.Sprintf("http://127.0.0.1:%d", base+11), "--token-file", filepath.Join(dir, "bootstrap.token")}
	out, err := felix(append([]string{"admin", "stream", "create", "orders", "--tenant", "t1", "--namespace", "default", "--shards", "1",
		"--durable", "--fsync", "on_commit", "--replicas", "3", "--ack", "quorum"}, cp...)...)
	require.NoError(t, err, out)

	type member struct {
		ID      string `json:"id"`
		Error   string `json:"error"`
		Replica *struct {
			Commit uint64 `json:"commit_index"`
		} `json:"replica"`
	}
	type view struct {
		Shards []struct {
			Leader  string   `json:"leader"`
			Term    uint64   `json:"term"`
			Members []member `json:"members"`
		} `json:"shards"`
	}
	shards := func() (v view) {
		if out, err := felix(append([]string{"admin", "stream", "shards", "orders", "--tenant", "t1", "--namespace", "default"}, cp...)...); err == nil {
			json.Unmarshal([]byte(out), &v)
		}
		return v
	}
	var v view
	require.Eventually(t, func() bool { v = shards(); return len(v.Shards) == 1 && v.Shards[0].Leader != "" },
		15*time.Second, 100*time.Millisecond, "felix admin stream shards names a leader")
	lead, term := v.Shards[0].Leader, v.Shards[0].Term
	n := strings.TrimPrefix(lead, "broker-")
	other := brokers[0]
	if n == "1" {
		other = brokers[1]
	}
	client := []string{"--ca", filepath.Join(dir, "tls", "ca.pem"), "--token", token, "--stream", "orders"}
	out, err = felix(append(append([]string{"pub", "--addr", other}, client...), "--ack", "--count", "3", "hello")...)
	require.NoError(t, err, out)

	out, err = script("kill", n)
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		v = shards()
		return len(v.Shards) == 1 && v.Shards[0].Leader != "" && v.Shards[0].Leader != lead
	}, 15*time.Second, 100*time.Millisecond, "another replica leads once %s is killed", lead)
	require.Greater(t, v.Shards[0].Term, term)
	for _, m := range v.Shards[0].Members {
		require.Equal(t, m.ID == lead, m.Error != "", "%s: %q", m.ID, m.Error)
	}
	out, err = felix(append(append([]string{"pub", "--addr", other}, client...), "--ack", "--count", "2", "again")...)
	require.NoError(t, err, out)
	out, err = felix(append([]string{"sub", "--addr", other, "--shard", "0", "--from", "earliest", "--count", "5"}, client...)...)
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, []string{"1 hello", "2 hello", "3 hello"}, lines[:3], "offset 0 is term 1's start")
	var a, b uint64
	_, err = fmt.Sscanf(lines[3]+" "+lines[4], "%d again %d again", &a, &b)
	require.NoError(t, err, out)
	require.Greater(t, a, uint64(4), "the new term's start takes an offset")
	require.Equal(t, a+1, b)

	out, err = script("start", n)
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		v = shards()
		if len(v.Shards) != 1 || len(v.Shards[0].Members) != 3 {
			return false
		}
		ms := v.Shards[0].Members
		for _, m := range ms {
			if m.Replica == nil || m.Replica.Commit != ms[0].Replica.Commit {
				return false
			}
		}
		return true
	}, 15*time.Second, 100*time.Millisecond, "the restarted %s catches up", lead)
}
