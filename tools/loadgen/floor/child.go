package floor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/felixmq/felix/cpuprofile"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/udp"
)

// ChildEnv names the role of a process StartChild started: "echo" for
// ServeEchoChild; a test binary may define others.
const ChildEnv = "FELIX_FLOOR_CHILD"

// Counts is what one side of a round trip spent so far.
type Counts struct {
	CPU time.Duration `json:"cpu_ns"`
	// Wakeups counts the times the process's OS threads were scheduled
	// onto a CPU (each futex or epoll wait that blocked ends in one).
	Wakeups    uint64 `json:"wakeups"`
	PacketsIn  uint64 `json:"packets_in"`
	PacketsOut uint64 `json:"packets_out"`
	// Allocs counts heap allocations (objects), GCs garbage collections.
	Allocs uint64 `json:"allocs"`
	GCs    uint64 `json:"gcs"`
	// Syncs and SyncTime are the log syncs a broker made and their total
	// duration (zero elsewhere).
	Syncs    uint64        `json:"syncs,omitempty"`
	SyncTime time.Duration `json:"sync_ns,omitempty"`
}

// Sub is c - o, field by field.
func (c Counts) Sub(o Counts) Counts {
	return Counts{CPU: c.CPU - o.CPU, Wakeups: c.Wakeups - o.Wakeups,
		PacketsIn: c.PacketsIn - o.PacketsIn, PacketsOut: c.PacketsOut - o.PacketsOut,
		Allocs: c.Allocs - o.Allocs, GCs: c.GCs - o.GCs, Syncs: c.Syncs - o.Syncs, SyncTime: c.SyncTime - o.SyncTime}
}

// Add is c + o, field by field.
func (c Counts) Add(o Counts) Counts {
	return Counts{CPU: c.CPU + o.CPU, Wakeups: c.Wakeups + o.Wakeups,
		PacketsIn: c.PacketsIn + o.PacketsIn, PacketsOut: c.PacketsOut + o.PacketsOut,
		Allocs: c.Allocs + o.Allocs, GCs: c.GCs + o.GCs, Syncs: c.Syncs + o.Syncs, SyncTime: c.SyncTime + o.SyncTime}
}

// Own is this process's counts; fill (nil: none) adds what only its
// caller knows (packets, syncs).
func Own(fill func(*Counts)) Counts {
	var c Counts
	if p, err := cpuprofile.Process(0); err == nil {
		c.CPU = p.User + p.System
	}
	c.Wakeups = wakeups()
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	c.Allocs, c.GCs = s[0].Value.Uint64(), s[1].Value.Uint64()
	if fill != nil {
		fill(&c)
	}
	return c
}

// SocketPackets fills in a udp conn's packets, for Own.
func SocketPackets(pc *udp.Conn) func(*Counts) {
	return func(c *Counts) {
		s := pc.Stats()
		c.PacketsIn, c.PacketsOut = s.PacketsIn, s.PacketsOut
	}
}

// RunChild is a child's side of the protocol: it reports addr and the
// certificate's fingerprint on out, then answers each "stats" line on in
// with its Counts (as JSON, Own(fill)), until in ends.
func RunChild(in io.Reader, out io.Writer, addr, fingerprint string, fill func(*Counts)) error {
	if _, err := fmt.Fprintf(out, "ready %s %s\n", addr, fingerprint); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() != "stats" {
			return fmt.Errorf("floor: child: unknown request %q", sc.Text())
		}
		b, _ := json.Marshal(Own(fill))
		if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Endpoint is what a child serves with: a fresh self-signed certificate
// and a udp conn on 127.0.0.1.
func Endpoint() (*devtls.Cert, *udp.Conn, error) {
	cert, err := devtls.SelfSigned()
	if err != nil {
		return nil, nil, err
	}
	pc, err := udp.Listen("udp", "127.0.0.1:0", udp.Config{})
	return cert, pc, err
}

// ServeEchoChild is the echo role: ServeEcho on an Endpoint, until in
// ends; with syncDir (not ""), each reply waits for a RawSync append in it.
func ServeEchoChild(in io.Reader, out io.Writer, syncDir string) error {
	cert, pc, err := Endpoint()
	if err != nil {
		return err
	}
	defer pc.Close()
	var rs *RawSync
	if syncDir != "" {
		if rs, err = OpenRawSync(syncDir); err != nil {
			return err
		}
		defer rs.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeEcho(ctx, pc, cert.TLS, rs) }()
	err = RunChild(in, out, pc.LocalAddr().String(), cert.Fingerprint, SocketPackets(pc))
	cancel()
	return errors.Join(err, <-served)
}

// Child is a server process of a yardstick.
type Child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	Addr string
	// Fingerprint is the SHA-256 of the child's certificate
	// (devtls.PinnedConfig trusts it).
	Fingerprint string
}

// StartChild runs exe with ChildEnv=role (and env) and waits until it
// serves. Its stderr goes to this process's.
func StartChild(ctx context.Context, exe, role string, args, env []string) (*Child, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(append(os.Environ(), ChildEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("floor: start %s child: %w", role, err)
	}
	c := &Child{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := c.out.ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != "ready" {
		c.Close()
		return nil, fmt.Errorf("floor: %s child did not start: %q, %v", role, line, err)
	}
	c.Addr, c.Fingerprint = f[1], f[2]
	return c, nil
}

// Stats asks the child for its counts.
func (c *Child) Stats() (Counts, error) {
	var s Counts
	if _, err := io.WriteString(c.in, "stats\n"); err != nil {
		return s, err
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return s, fmt.Errorf("floor: child stats: %w", err)
	}
	return s, json.Unmarshal(line, &s)
}

// Close ends the child (closing its stdin) and waits for it.
func (c *Child) Close() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		return <-done
	}
}
