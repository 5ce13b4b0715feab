package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/felixmq/felix/internal/impair"
)

// proxyFlags put felix-loadgen's traffic through the impairment proxy of
// the reliability tests: --via-proxy starts one in this process in front of
// --addr, and every client dials it instead.
type proxyFlags struct {
	on                       bool
	loss, reorder, duplicate float64
	delay, jitter            time.Duration
	mtu                      int
}

func (p *proxyFlags) define(set *flag.FlagSet) {
	set.BoolVar(&p.on, "via-proxy", false, "send all traffic through an in-process impairment proxy in front of --addr (both directions impaired)")
	set.Float64Var(&p.loss, "proxy-loss", 0, "with --via-proxy: drop each datagram with this `probability`")
	set.DurationVar(&p.delay, "proxy-delay", 0, "with --via-proxy: hold each datagram this long")
	set.DurationVar(&p.jitter, "proxy-jitter", 0, "with --via-proxy: plus a uniform random extra up to this")
	set.Float64Var(&p.reorder, "proxy-reorder", 0, "with --via-proxy: hold a datagram back 5 ms with this `probability`")
	set.Float64Var(&p.duplicate, "proxy-duplicate", 0, "with --via-proxy: send a datagram twice with this `probability`")
	set.IntVar(&p.mtu, "proxy-mtu", 0, "with --via-proxy: drop datagrams larger than this many `bytes` (0: no cap)")
}

func (p *proxyFlags) validate() error {
	for name, v := range map[string]float64{"--proxy-loss": p.loss, "--proxy-reorder": p.reorder, "--proxy-duplicate": p.duplicate} {
		if v < 0 || v > 1 {
			return fmt.Errorf("%s %v: want a probability in [0, 1]", name, v)
		}
	}
	if p.delay < 0 || p.jitter < 0 || p.mtu < 0 {
		return fmt.Errorf("--proxy-delay, --proxy-jitter and --proxy-mtu must not be negative")
	}
	return nil
}

// start starts the proxy in front of addr and returns the address to dial
// and a stop function that reports what the proxy did to log.
func (p *proxyFlags) start(addr string, log io.Writer) (string, func(), error) {
	px, err := impair.New(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--via-proxy: %w", err)
	}
	px.Set(impair.Both, impair.Impairment{Loss: p.loss, Delay: p.delay, Jitter: p.jitter,
		Reorder: p.reorder, Duplicate: p.duplicate, MaxDatagram: p.mtu})
	fmt.Fprintf(log, "via impairment proxy %s -> %s (loss %v, delay %v ± %v, reorder %v, duplicate %v, mtu %d)\n",
		px.Addr(), addr, p.loss, p.delay, p.jitter, p.reorder, p.duplicate, p.mtu)
	return px.Addr(), func() {
		st := px.Stats()
		fmt.Fprintf(log, "impairment proxy: relayed %d, dropped %d (loss %d, burst %d, size %d), duplicated %d, reordered %d\n",
			st.Relayed, st.Dropped(), st.DroppedLoss, st.DroppedBurst, st.DroppedSize, st.Duplicated, st.Reordered)
		px.Close()
	}, nil
}
