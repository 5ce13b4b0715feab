package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// startProgress prints one line per second to cfg.Log until the returned
// function is called (which waits for the printer).
func (r *round) startProgress() (stop func()) {
	if r.cfg.Log == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastSent uint64
		last := r.start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				lastSent = r.progressLine(now, last, lastSent)
				last = now
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// progressLine prints the state at now and returns the messages sent so far.
func (r *round) progressLine(now, last time.Time, lastSent uint64) uint64 {
	var sent, acked, delivered, dropped uint64
	for _, w := range r.pubs {
		sent += w.sent.Load()
		acked += w.acked.Load()
	}
	for _, w := range r.subs {
		delivered += w.delivered.Load()
		dropped += w.dropped.Load()
	}
	phase := "run"
	select {
	case <-r.pubsDone:
		phase = "drain"
	default:
		if now.Before(r.warmupEnd) {
			phase = "warmup"
		}
	}
	secs := now.Sub(last).Seconds()
	rate := float64(sent-lastSent) / secs
	ackText := "acked n/a"
	if r.cfg.Ack != "none" {
		ackText = "acked " + group(acked)
	}
	fmt.Fprintf(r.cfg.Log, "[round %d] %5.0fs %-6s %12s msg/s %9.2f MB/s  sent %s  %s  delivered %s  dropped %s\n",
		r.n, now.Sub(r.start).Seconds(), phase, group(uint64(rate)), rate*float64(r.cfg.Payload)/1e6,
		group(sent), ackText, group(delivered), group(dropped))
	return sent
}

// group prints n with thousands separators.
func group(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// num prints v with one decimal, or grouped without decimals from 1,000 on.
func num(v float64) string {
	if v >= 1000 {
		return group(uint64(v + 0.5))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// maxListedSubscribers: above this the table groups subscribers (the JSON
// always lists each).
const maxListedSubscribers = 20

// writeTable prints the final report.
func writeTable(w io.Writer, res *Result) {
	c := res.Config
	bound := "for " + c.Duration
	if c.Count > 0 {
		bound = group(uint64(c.Count)) + " messages"
	}
	ack := "ack " + c.Ack
	if c.Ack != "none" {
		ack += fmt.Sprintf(" (inflight %d)", c.Inflight)
		if c.Idempotent {
			ack += " idempotent"
		}
	}
	rate := "unpaced"
	if c.Rate > 0 {
		rate = fmt.Sprintf("paced at %s msg/s", group(uint64(c.Rate)))
	}
	fmt.Fprintf(w, "felix-loadgen: profile %s, %s × %s, payload %d B, batch %d, %s, %s, %s after %s warm-up\n",
		c.Profile, plural(c.Publishers, "publisher"), plural(c.Subscribers, "subscriber"), c.Payload, c.Batch, ack, rate, bound, c.Warmup)
	for _, s := range res.Streams {
		fmt.Fprintf(w, "stream %s/%s/%s: %s, %s\n", c.Tenant, c.Namespace, s.Name, plural(s.Shards, "shard"), durability(s.Durable, s.Fsync))
	}
	if c.Slow > 0 {
		fmt.Fprintf(w, "%s slow: %s per event while publishing\n", plural(c.Slow, "subscriber"), c.SlowDelay)
	}
	if c.Profile == "latency" {
		fmt.Fprintln(w, "delivery batching is the broker's: the latency profile needs FELIX_EVENT_BATCH_MAX_EVENTS=1 FELIX_EVENT_BATCH_MAX_DELAY_US=0")
	}
	if res.Interrupted {
		fmt.Fprintf(w, "INTERRUPTED: round %d stopped publishing early; its numbers cover what ran\n", len(res.Rounds))
	}
	fmt.Fprintln(w)
	writeRounds(w, res)
	if len(res.Rounds) > 1 {
		fmt.Fprintln(w)
		writeSummary(w, res)
	}
	if n := len(res.Rounds); n > 0 {
		fmt.Fprintln(w)
		writeSubscribers(w, &res.Rounds[n-1])
	}
}

func us(s *LatencySummary, f func(*LatencySummary) float64) string {
	if s == nil {
		return "n/a"
	}
	return strconv.FormatFloat(f(s), 'f', 1, 64)
}

func writeRounds(w io.Writer, res *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tmsg/s\tMB/s\tdelivered msg/s\tpublished\tdelivered\tdropped\tunaccounted\tduplicates\tretries\tfailed\t")
	for _, r := range res.Rounds {
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n",
			r.Round, group(uint64(r.MsgPerS)), r.MBPerS, group(uint64(r.DeliveredMsgPerS)),
			group(r.Published), group(r.Delivered), group(r.Dropped), r.Unaccounted, group(r.Duplicates), group(r.Retries), group(r.PublishFailed))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tlatency µs\tcount\tp50\tp90\tp99\tp999\tmax\t")
	for _, r := range res.Rounds {
		for _, l := range []struct {
			name string
			s    *LatencySummary
		}{{"ack", r.AckLatency}, {"publish→delivery", r.DeliveryLatency}, {"… healthy subscribers", r.HealthyDeliveryLatency}} {
			if l.s == nil && l.name == "… healthy subscribers" {
				continue
			}
			count := "0"
			if l.s != nil {
				count = group(l.s.Count)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Round, l.name, count,
				us(l.s, p50), us(l.s, p90), us(l.s, p99), us(l.s, p999), us(l.s, pmax))
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "latency from the intended send time; MB = 10^6 payload bytes; rates and latencies cover the measured")
	fmt.Fprintln(w, "phase, counts the whole round (warm-up included) summed over subscribers")
	writeFloor(w, res)
	if res.Config.Ack == "none" {
		fmt.Fprintln(w, "ack latency n/a: --ack none publishes fire-and-forget")
	}
	for _, r := range res.Rounds {
		if r.DeliveryLatencyNote != "" {
			fmt.Fprintf(w, "publish→delivery latency %s\n", r.DeliveryLatencyNote)
			break
		}
	}
}

func p50(s *LatencySummary) float64  { return s.P50 }
func p90(s *LatencySummary) float64  { return s.P90 }
func p99(s *LatencySummary) float64  { return s.P99 }
func p999(s *LatencySummary) float64 { return s.P999 }
func pmax(s *LatencySummary) float64 { return s.Max }

func writeSummary(w io.Writer, res *Result) {
	s := res.Summary
	fmt.Fprintf(w, "over %d rounds:\n", s.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmin\tmedian\tmax\t")
	rows := []struct {
		name string
		sp   *Spread
	}{
		{"msg/s", s.MsgPerS}, {"MB/s", s.MBPerS}, {"delivered msg/s", s.DeliveredMsgPerS},
		{"ack p50 µs", s.AckP50}, {"ack p99 µs", s.AckP99}, {"delivery p50 µs", s.DeliveryP50}, {"delivery p99 µs", s.DeliveryP99},
	}
	if s.FloorAckP50 != nil {
		rows = append(rows, []struct {
			name string
			sp   *Spread
		}{{"ack p50 ÷ bare", s.FloorAckP50}, {"ack p99 ÷ bare", s.FloorAckP99}, {"delivery − ack p50 µs", s.FloorDeliveryOverAck},
			{"broker CPU ÷ bare", s.FloorCPU}}...)
	}
	for _, row := range rows {
		if row.sp == nil {
			fmt.Fprintf(tw, "%s\tn/a\tn/a\tn/a\t\n", row.name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", row.name, num(row.sp.Min), num(row.sp.Median), num(row.sp.Max))
	}
	tw.Flush()
	fmt.Fprintf(w, "dropped %s, unaccounted %d, duplicates %s, retries %s, failed publishes %s, redials %s over all rounds\n",
		group(s.Dropped), s.Unaccounted, group(s.Duplicates), group(s.Retries), group(s.PublishFailed), group(s.Redials))
	if s.BrokerRSSMax != nil {
		fmt.Fprintf(w, "broker anonymous RSS max %.1f / %.1f / %.1f MiB (min / median / max over rounds)\n",
			s.BrokerRSSMax.Min/(1<<20), s.BrokerRSSMax.Median/(1<<20), s.BrokerRSSMax.Max/(1<<20))
	}
	if s.Dropped > 0 {
		fmt.Fprintln(w, "events were dropped: a subscriber of an ephemeral stream fell more than its queue behind (FELIX_SUBSCRIBER_QUEUE, _BYTES)")
		fmt.Fprintln(w, "  and the broker's policy dropped for it; a durable stream (--durable) catches such a subscriber up from its log instead")
	}
}

// writeSubscribers lists each subscriber of the round, or, when there are
// many, the healthy and the slow ones as groups plus every one whose
// accounting is off.
func writeSubscribers(w io.Writer, r *Round) {
	if len(r.Subscribers) == 0 {
		fmt.Fprintln(w, "no subscribers")
		return
	}
	fmt.Fprintf(w, "subscribers (round %d): unaccounted = published - delivered - dropped, must be 0\n", r.Round)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subscriber\tslow\tpublished\tdelivered\tdropped\tunaccounted\tduplicates\tdelivery p50\tp99\t")
	row := func(name string, s SubscriberResult) {
		opt := func(v *float64) string {
			if v == nil {
				return "n/a"
			}
			return strconv.FormatFloat(*v, 'f', 1, 64)
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", name, s.Slow, group(s.Published), group(s.Delivered),
			group(s.Dropped), s.Unaccounted, group(s.Duplicates), opt(s.DeliveryP50), opt(s.DeliveryP99))
	}
	if len(r.Subscribers) <= maxListedSubscribers {
		for _, s := range r.Subscribers {
			row(strconv.Itoa(s.ID), s)
		}
	} else {
		for _, slow := range []bool{false, true} {
			g, n := groupSubscribers(r.Subscribers, slow)
			if n > 0 {
				row(fmt.Sprintf("%d %s (sum)", n, map[bool]string{false: "healthy", true: "slow"}[slow]), g)
			}
		}
		for _, s := range r.Subscribers {
			if s.Unaccounted != 0 || s.Error != "" {
				row(strconv.Itoa(s.ID), s)
			}
		}
	}
	tw.Flush()
	for _, s := range r.Subscribers {
		if s.Error != "" {
			fmt.Fprintf(w, "error: %s\n", s.Error)
		}
	}
	for name, counts := range r.ShardEvents {
		fmt.Fprintf(w, "events per shard of %s (all publishers, from /debug/felix/stats): %v\n", name, counts)
	}
}

// groupSubscribers sums the counts of the slow (or healthy) subscribers;
// latencies are not summed.
func groupSubscribers(subs []SubscriberResult, slow bool) (SubscriberResult, int) {
	var g SubscriberResult
	n := 0
	for _, s := range subs {
		if s.Slow != slow {
			continue
		}
		n++
		g.Slow = slow
		g.Published += s.Published
		g.Delivered += s.Delivered
		g.Dropped += s.Dropped
		g.Unaccounted += absInt(s.Unaccounted)
		g.Duplicates += s.Duplicates
	}
	return g, n
}

// writeJSONFile writes res, indented, to path.
func writeJSONFile(path string, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeFloor is the --floor table: each round's bare round trip and the
// round's figures against it.
func writeFloor(w io.Writer, res *Result) {
	if len(res.Rounds) == 0 || res.Rounds[0].Floor == nil {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tbare RTT µs\tcount\tp50\tp99\tack ÷ bare p50\tp99\tdelivery − ack p50 µs\tbroker CPU µs/publish\tbare server CPU µs\t÷\t")
	for _, r := range res.Rounds {
		f := r.Floor
		if f == nil {
			continue
		}
		opt := func(v float64, format string) string {
			if v == 0 {
				return "n/a"
			}
			return fmt.Sprintf(format, v)
		}
		over := "n/a"
		if f.DeliveryOverAck != nil {
			over = fmt.Sprintf("%+.1f", *f.DeliveryOverAck)
		}
		fmt.Fprintf(tw, "%d\t\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Round, group(uint64(f.Count)), f.P50, f.P99,
			opt(f.AckP50, "%.2f×"), opt(f.AckP99, "%.2f×"), over, opt(f.BrokerCPU, "%.1f"), opt(f.ServerCPU, "%.1f"), opt(f.CPURatio, "%.2f×"))
	}
	tw.Flush()
	fmt.Fprintln(w, "floor: a bare quic-go round trip to a child process on the broker's transport configuration, one at a time,")
	fmt.Fprintln(w, "with the bytes of one acked publish and its ack, timed before the round; broker CPU per acked publish over the")
	fmt.Fprintln(w, "round from /debug/felix/stats (its delivery to subscribers included)")
}
