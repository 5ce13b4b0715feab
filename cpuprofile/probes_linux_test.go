//go:build linux && (amd64 || arm64)

package cpuprofile

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/linux"
	"github.com/stretchr/testify/require"
)

var unprivilegedChild = flag.Bool("cpuprofile.unprivileged-child", false,
	"set when TestOpenProbesUnprivileged re-executes the test binary as nobody")

func TestProbesMeasureSoftirqAndBlockIO(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("eBPF probes need root; TestOpenProbesUnprivileged covers this user")
	}
	p, err := OpenProbes()
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("this machine cannot run the probes: %v", err)
	}
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()

	softBefore, err := p.Softirq()
	require.NoError(t, err)
	ioBefore, err := p.BlockIO()
	require.NoError(t, err)

	loopbackUDP(t, 4000)
	syncWrites(t, 5)

	softAfter, err := p.Softirq()
	require.NoError(t, err)
	ioAfter, err := p.BlockIO()
	require.NoError(t, err)

	var perVector [NumSoftirqs]SoftirqVector
	for _, cpu := range SubSoftirq(softAfter, softBefore) {
		for v, s := range cpu.Vectors {
			perVector[v].Name = s.Name
			perVector[v].Time += s.Time
			perVector[v].Count += s.Count
		}
	}
	for _, v := range perVector {
		if v.Count > 0 {
			t.Logf("softirq %-8s %6d runs %12v", v.Name, v.Count, v.Time)
		}
	}
	require.Len(t, softAfter, len(softBefore))
	require.True(t, perVector[3].Time > 0 || perVector[1].Time > 0, "no net_rx or timer softirq time: %+v", perVector)

	io := ioAfter.Sub(ioBefore)
	t.Logf("block I/O: %d completions, mean %v", io.Count, io.Total/time.Duration(max(io.Count, 1)))
	for i, n := range io.Slots {
		if lo, hi := BlockIOSlotRange(i); n > 0 {
			t.Logf("  [%v, %v): %d", lo, hi, n)
		}
	}
	require.Positive(t, io.Count, "no block request completed")

	require.NoError(t, p.Close())
	_, err = p.Softirq()
	require.ErrorIs(t, err, ErrClosed)
}

// loopbackUDP sends n datagrams between two sockets on 127.0.0.1: each one
// goes through the NET_RX softirq of the sending CPU.
func loopbackUDP(t *testing.T, n int) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer rx.Close()
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	require.NoError(t, err)
	defer tx.Close()
	msg, buf := make([]byte, 200), make([]byte, 2048)
	for i := 0; i < n; i++ {
		_, err := tx.Write(msg)
		require.NoError(t, err)
		// Read back every datagram so none is dropped on a full buffer.
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, _, err = rx.ReadFromUDP(buf)
		require.NoError(t, err)
	}
}

// syncWrites writes and fsyncs a file n times, which issues block requests
// when the temporary directory is on a block device (not tmpfs).
func syncWrites(t *testing.T, n int) {
	f, err := os.Create(filepath.Join(t.TempDir(), "blockio"))
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := range n {
		chunk[0] = byte(i)
		_, err := f.Write(chunk)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
	}
}

// OpenProbes must refuse an unprivileged user with ErrNotSupported, the
// signal to degrade to /proc. As root the test re-executes its binary as
// nobody to see that; as any other user it checks directly.
func TestOpenProbesUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		_, err := OpenProbes()
		t.Logf("OpenProbes as uid %d: %v", os.Geteuid(), err)
		require.ErrorIs(t, err, ErrNotSupported)
		return
	}
	require.False(t, *unprivilegedChild, "the re-executed child still runs as root")
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
	cmd := exec.Command(bin, "-test.run=^TestOpenProbesUnprivileged$", "-test.v", "-test.count=1",
		"-cpuprofile.unprivileged-child")
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot start the test binary as nobody (noexec %s?): %v", filepath.Dir(bin), err)
	}
	require.NoError(t, err, "child as nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestOpenProbesUnprivileged")
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "OpenProbes as uid") {
			t.Log(strings.TrimSpace(sc.Text()))
		}
	}
}

func copyExecutable(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "cpuprofile-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	src, err := os.Open(exe)
	require.NoError(t, err)
	defer src.Close()
	bin := filepath.Join(dir, "cpuprofile.test")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return bin
}

// The C structs in bpf/*.bpf.c hard-code field offsets; this compares them
// with the running kernel's tracepoint formats.
func TestTracepointLayout(t *testing.T) {
	root := ""
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(dir + "/events/irq"); err == nil {
			root = dir
			break
		}
	}
	if root == "" {
		t.Skip("tracefs is not mounted or not readable by this user")
	}
	for _, tc := range []struct {
		event, field string
		offset, size int
	}{
		{"irq/softirq_entry", "vec", 8, 4},
		{"irq/softirq_exit", "vec", 8, 4},
		{"block/block_rq_issue", "dev", 8, 4},
		{"block/block_rq_issue", "sector", 16, 8},
		{"block/block_rq_complete", "dev", 8, 4},
		{"block/block_rq_complete", "sector", 16, 8},
	} {
		b, err := os.ReadFile(filepath.Join(root, "events", tc.event, "format"))
		require.NoError(t, err)
		want := fmt.Sprintf(" %s;\toffset:%d;\tsize:%d;", tc.field, tc.offset, tc.size)
		require.Contains(t, string(b), want, "%s field %s", tc.event, tc.field)
	}
}
