package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/felixmq/felix/tools/loadgen/floor"
)

// FloorResult is a round's yardstick (--floor): a bare quic-go round trip
// between this process and a child process serving floor.ServeEcho on the
// broker's udp conn, TLS and QUIC configuration, with the bytes of one
// acked publish of the round's batch and of its ack, one at a time; and the
// round's figures against it.
type FloorResult struct {
	Count int64   `json:"count"`
	P50   float64 `json:"bare_p50_us"`
	P99   float64 `json:"bare_p99_us"`
	// ServerCPU is the bare server's CPU per round trip (µs; 0 where the
	// platform does not say).
	ServerCPU float64 `json:"bare_server_cpu_us,omitempty"`
	// AckP50, AckP99: the round's ack latency over the bare round trip's.
	AckP50 float64 `json:"ack_p50_ratio,omitempty"`
	AckP99 float64 `json:"ack_p99_ratio,omitempty"`
	// DeliveryOverAck is the round's publish→delivery p50 minus its ack p50.
	DeliveryOverAck *float64 `json:"delivery_minus_ack_p50_us,omitempty"`
	// BrokerCPU is the broker process's CPU per acked publish over the
	// round (µs; its delivery to subscribers included), from
	// /debug/felix/stats; CPURatio is that over ServerCPU.
	BrokerCPU float64 `json:"broker_cpu_per_publish_us,omitempty"`
	CPURatio  float64 `json:"cpu_ratio,omitempty"`
}

// childMain serves the echo role when this process was started as a
// yardstick's child (floor.ChildEnv); false when it was not.
func childMain(stdin io.Reader, stdout, stderr io.Writer) (int, bool) {
	switch role := os.Getenv(floor.ChildEnv); role {
	case "":
		return 0, false
	case "echo":
		if err := floor.ServeEchoChild(stdin, stdout, ""); err != nil {
			fmt.Fprintf(stderr, "felix-loadgen: floor child: %v\n", err)
			return exitFail, true
		}
		return exitOK, true
	default:
		fmt.Fprintf(stderr, "felix-loadgen: unknown %s %q\n", floor.ChildEnv, role)
		return exitUsage, true
	}
}

// measureFloor times the bare round trip for --warmup, then for --duration
// (2 s under --count).
func measureFloor(ctx context.Context, cfg *Config) (*FloorResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	child, err := floor.StartChild(ctx, exe, "echo", nil, nil)
	if err != nil {
		return nil, err
	}
	defer child.Close()
	e, err := floor.DialEcho(ctx, child.Addr, child.Fingerprint)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	payloads := make([][]byte, cfg.Batch)
	for i := range payloads {
		payloads[i] = make([]byte, cfg.Payload)
	}
	req := floor.Request(payloads...)
	d := cfg.Duration
	if d == 0 {
		d = 2 * time.Second
	}
	var h Histogram
	run := func(d time.Duration, record bool) error {
		for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
			l, err := e.RoundTrip(req)
			if err != nil {
				return err
			}
			if record {
				h.Record(int64(l))
			}
		}
		return nil
	}
	if err := run(cfg.Warmup, false); err != nil {
		return nil, err
	}
	s0, err0 := child.Stats()
	if err := run(d, true); err != nil {
		return nil, err
	}
	s1, err1 := child.Stats()
	if h.Count() == 0 {
		return nil, errors.New("no round trip completed")
	}
	s := h.Summary()
	f := &FloorResult{Count: int64(h.Count()), P50: s.P50, P99: s.P99}
	if err0 == nil && err1 == nil {
		f.ServerCPU = float64(s1.Sub(s0).CPU.Nanoseconds()) / 1e3 / float64(h.Count())
	}
	return f, nil
}

// compare puts the round's figures next to the floor; brokerCPU is the
// broker's CPU over the round (0: unknown).
func (f *FloorResult) compare(r *Round, batch int, brokerCPU time.Duration) {
	if a := r.AckLatency; a != nil && f.P50 > 0 {
		f.AckP50, f.AckP99 = a.P50/f.P50, a.P99/f.P99
		if d := r.DeliveryLatency; d != nil {
			v := d.P50 - a.P50
			f.DeliveryOverAck = &v
		}
	}
	if brokerCPU > 0 && r.Published > 0 {
		f.BrokerCPU = float64(brokerCPU.Nanoseconds()) / 1e3 / (float64(r.Published) / float64(batch))
		if f.ServerCPU > 0 {
			f.CPURatio = f.BrokerCPU / f.ServerCPU
		}
	}
}

// brokerCPU is the broker process's CPU time so far, from
// /debug/felix/stats; false without the admin API or a CPU account.
func (a *admin) brokerCPU(ctx context.Context) (time.Duration, bool) {
	if a == nil {
		return 0, false
	}
	var stats struct {
		CPU *struct {
			Process struct {
				User   time.Duration `json:"user_ns"`
				System time.Duration `json:"system_ns"`
			} `json:"process"`
		} `json:"cpu"`
	}
	if err := a.get(ctx, "/debug/felix/stats", &stats); err != nil || stats.CPU == nil {
		return 0, false
	}
	return stats.CPU.Process.User + stats.CPU.Process.System, true
}
