//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/linux"
)

var nobodyChild = flag.Bool("felixtrace.nobody-child", false,
	"set when TestBPFWithoutRoot re-executes the test binary as nobody")

// felixtrace --bpf as an ordinary user: the real OpenProbes refuses, one line
// says so, and the run goes on with the /proc numbers. As root the test
// re-executes its binary as nobody to see that (TestBPFDegradesWithOneLine
// covers the same path with an injected opener everywhere).
func TestBPFWithoutRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		var stdout, stderr bytes.Buffer
		sum, err := run(context.Background(), Config{Admin: fakeAdmin(t), Interval: 20 * time.Millisecond,
			Duration: 60 * time.Millisecond, BPF: true, Top: 3}, &stdout, &stderr)
		require.NoError(t, err)
		t.Logf("as uid %d: %s", os.Geteuid(), stderr.String())
		require.Regexp(t, `^felixtrace: eBPF probes unavailable \(cpuprofile: not supported: .+\); using /proc numbers\n$`, stderr.String())
		require.Equal(t, 3, sum.Samples)
		require.Nil(t, sum.BPF)
		return
	}
	require.False(t, *nobodyChild, "the re-executed child still runs as root")
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody to re-execute as: %v", err)
	}
	uid, err := strconv.ParseUint(nobody.Uid, 10, 32)
	require.NoError(t, err)
	gid, err := strconv.ParseUint(nobody.Gid, 10, 32)
	require.NoError(t, err)
	attr, err := linux.SysProcAttrAsUser(uint32(uid), uint32(gid))
	require.NoError(t, err)

	// go test builds the binary in a directory only its owner can enter.
	bin := copyExecutable(t)
	cmd := exec.Command(bin, "-test.run=^TestBPFWithoutRoot$", "-test.v", "-test.count=1", "-felixtrace.nobody-child")
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot start the test binary as nobody (noexec %s?): %v", filepath.Dir(bin), err)
	}
	require.NoError(t, err, "child as nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestBPFWithoutRoot")
	i := bytes.Index(out, []byte("felixtrace: eBPF probes unavailable ("))
	require.GreaterOrEqual(t, i, 0, "child as nobody:\n%s", out)
	line, _, _ := bytes.Cut(out[i:], []byte("\n"))
	t.Logf("as nobody: %s", line)
}

func copyExecutable(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "felixtrace-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	src, err := os.Open(exe)
	require.NoError(t, err)
	defer src.Close()
	bin := filepath.Join(dir, "felixtrace.test")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return bin
}
