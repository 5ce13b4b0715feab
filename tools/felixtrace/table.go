package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// printSample writes one interval's table; top bounds the connection and
// thread rows.
func printSample(w io.Writer, s *Sample, top int) {
	fmt.Fprintf(w, "── %s  interval %s %s\n", s.Time.Local().Format("15:04:05.000"), fmtDur(s.Interval), strings.Repeat("─", 40))
	fmt.Fprintf(w, "%-21s %-10s %-16s %7s %5s %6s %5s %11s %11s %4s  %s\n", "CONNECTION", "ROLE", "TENANT/PRINCIPAL", "RTT", "MTU", "LOST", "CONG", "IN/s", "OUT/s", "SUBS", "STREAMS")
	for _, c := range s.Connections[:min(top, len(s.Connections))] {
		fmt.Fprintf(w, "%-21s %-10s %-16s %7s %5d %6d %5d %11s %11s %4d  %s\n", c.Remote, roleLabel(c.Role), clip(who(c.Tenant, c.Principal), 16),
			fmtDur(c.RTT), c.MTU, c.Lost, c.CongestionEvents, fmtRate(c.BytesInRate), fmtRate(c.BytesOutRate), c.Subscriptions, strings.Join(c.Streams, " "))
	}
	more(w, len(s.Connections)-top, "connections")
	printStreams(w, s.Streams, top)
	if s.Process != nil {
		fmt.Fprintf(w, "%-24s %8s %6s %6s %6s\n", "THREAD", "TID", "CPU%", "USR%", "SYS%")
		for _, t := range s.Threads[:min(top, len(s.Threads))] {
			fmt.Fprintf(w, "%-24s %8d %6.1f %6.1f %6.1f\n", t.Name, t.TID, t.CPU, t.User, t.System)
		}
		more(w, len(s.Threads)-top, "threads")
	}
	c := s.Commit
	if c.DurableShards == 0 {
		fmt.Fprintf(w, "%-9s no durable shards\n", "COMMIT")
	} else {
		fmt.Fprintf(w, "%-9s shards %d  syncs/s %.0f  waiters/sync %.1f  records/sync %.1f  sync p50 %s p99 %s  errors %d\n",
			"COMMIT", c.DurableShards, c.SyncsRate, c.WaitersPerSync, c.RecordsPerSync, fmtDur(c.SyncP50), fmtDur(c.SyncP99), c.SyncErrors)
	}
	f := s.Fanout
	fmt.Fprintf(w, "%-9s subs %d  max depth %d/%d  total depth %d  drops/s %s  delivered/s %s\n",
		"FANOUT", f.Subscriptions, f.MaxDepth, f.MaxDepthCapacity, f.TotalDepth, fmtCount(f.DropRate), fmtCount(f.DeliveredRate))
	printFeatures(w, &s.Features)
	printClusterSample(w, &s.Cluster)
	printReplicas(w, s.Replicas, top)
	printRoles(w, s.Roles)
	if p := s.Process; p != nil {
		fmt.Fprintf(w, "%-9s cpu %.1f%% of one CPU (user %.1f%% sys %.1f%%)  threads %d\n", "PROCESS", p.CPU, p.User, p.System, p.Threads)
	} else {
		fmt.Fprintf(w, "%-9s cpu unavailable: %s\n", "PROCESS", s.CPUUnavailable)
	}
	if y := s.System; y != nil {
		fmt.Fprintf(w, "%-9s %d CPUs  user %.1f%%  sys %.1f%%  irq %.1f%%  softirq %.1f%%  iowait %.1f%%  steal %.1f%%  idle %.1f%%\n",
			"SYSTEM", y.CPUs, y.User, y.System, y.IRQ, y.SoftIRQ, y.IOWait, y.Steal, y.Idle)
	}
	if b := s.BPF; b != nil {
		fmt.Fprintf(w, "%-9s %s  (eBPF, %% of all CPUs)\n", "SOFTIRQ", softirqLine(b.Softirq, func(v SoftirqSample) string {
			return fmt.Sprintf("%s %.2f%% (%d)", v.Name, v.Pct, v.Count)
		}))
		fmt.Fprintf(w, "%-9s %d requests  p50 %s  p99 %s  mean %s  (eBPF)\n", "BLOCK IO",
			b.BlockIO.Count, fmtDur(b.BlockIO.P50), fmtDur(b.BlockIO.P99), fmtDur(b.BlockIO.Mean))
	}
}

// roleLabel shortens publisher+subscriber to fit the column.
func roleLabel(r string) string {
	if r == "publisher+subscriber" {
		return "pub+sub"
	}
	return cmp.Or(r, "-")
}

// who is tenant/principal, or "-" before the connection authenticated.
func who(tenant, principal string) string {
	switch {
	case tenant == "":
		return "-"
	case principal == "":
		return tenant
	}
	return tenant + "/" + principal
}

// softirqLine lists the vectors that ran, most time first.
func softirqLine(vs []SoftirqSample, format func(SoftirqSample) string) string {
	ran := slices.DeleteFunc(slices.Clone(vs), func(v SoftirqSample) bool { return v.Count == 0 })
	slices.SortStableFunc(ran, func(a, b SoftirqSample) int { return cmp.Compare(b.Time, a.Time) })
	if len(ran) == 0 {
		return "none ran"
	}
	parts := make([]string, len(ran))
	for i, v := range ran {
		parts[i] = format(v)
	}
	return strings.Join(parts, "  ")
}

func more(w io.Writer, n int, what string) {
	if n > 0 {
		fmt.Fprintf(w, "  … %d more %s (--top)\n", n, what)
	}
}

// printSummary writes the run's summary.
func printSummary(w io.Writer, m *Summary, top int) {
	fmt.Fprintf(w, "══ summary: %d samples over %s (%s to %s) %s\n", m.Samples, fmtDur(m.Duration),
		m.Started.Local().Format("15:04:05"), m.Ended.Local().Format("15:04:05"), strings.Repeat("═", 24))
	for _, n := range m.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "%-24s %8s %8s %5s %6s %5s %10s %10s %11s %11s\n", "CONNECTION", "RTT mean", "RTT max", "MTU", "LOST", "CONG", "IN", "OUT", "IN/s", "OUT/s")
	for _, c := range m.Connections[:min(top, len(m.Connections))] {
		fmt.Fprintf(w, "%-24s %8s %8s %5d %6d %5d %10s %10s %11s %11s\n", c.Remote, fmtDur(c.RTTMean), fmtDur(c.RTTMax), c.MTU,
			c.Lost, c.CongestionEvents, fmtBytes(float64(c.BytesIn)), fmtBytes(float64(c.BytesOut)), fmtRate(c.BytesInRate), fmtRate(c.BytesOutRate))
	}
	more(w, len(m.Connections)-top, "connections")
	printStreamSummary(w, m.Streams, top)
	if len(m.Threads) > 0 {
		fmt.Fprintf(w, "%-24s %8s %9s %10s %9s\n", "THREAD", "TID", "CPU time", "CPU% mean", "CPU% max")
		for _, t := range m.Threads[:min(top, len(m.Threads))] {
			fmt.Fprintf(w, "%-24s %8d %9s %10.1f %9.1f\n", t.Name, t.TID, fmtDur(t.CPUTime), t.CPUMean, t.CPUMax)
		}
		more(w, len(m.Threads)-top, "threads")
	}
	c := m.Commit
	fmt.Fprintf(w, "%-9s syncs %d (%.0f/s mean, %.0f/s max)  waiters/sync %.1f  records/sync %.1f  sync p50 %s p99 %s (worst interval p99 %s)  errors %d\n",
		"COMMIT", c.Syncs, c.SyncsRate.Mean, c.SyncsRate.Max, c.WaitersPerSync, c.RecordsPerSync,
		fmtDur(c.SyncP50), fmtDur(c.SyncP99), fmtDur(c.SyncP99Max), c.SyncErrors)
	f := m.Fanout
	fmt.Fprintf(w, "%-9s subs max %d  max depth %d/%d  drops %d  delivered %d (%s/s mean, %s/s max)\n", "FANOUT",
		f.MaxSubscriptions, f.MaxDepth, f.MaxDepthCapacity, f.Drops, f.Delivered, fmtCount(f.DeliveredRate.Mean), fmtCount(f.DeliveredRate.Max))
	printClusterSummary(w, &m.Cluster)
	printReplicaSummary(w, m.Replicas, top)
	if p := m.Process; p != nil {
		fmt.Fprintf(w, "%-9s cpu %.1f%% mean, %.1f%% max of one CPU (user %.1f%% sys %.1f%% mean)\n", "PROCESS",
			p.CPU.Mean, p.CPU.Max, p.User.Mean, p.System.Mean)
	}
	if y := m.System; y != nil {
		mm := func(v MeanMax) string { return fmt.Sprintf("%.1f/%.1f%%", v.Mean, v.Max) }
		fmt.Fprintf(w, "%-9s %d CPUs, mean/max  user %s  sys %s  softirq %s  iowait %s  idle %s\n", "SYSTEM", y.CPUs,
			mm(y.User), mm(y.System), mm(y.SoftIRQ), mm(y.IOWait), mm(y.Idle))
	}
	if b := m.BPF; b != nil {
		fmt.Fprintf(w, "%-9s %s  (eBPF, total time and mean %% of all CPUs)\n", "SOFTIRQ", softirqLine(b.Softirq, func(v SoftirqSample) string {
			return fmt.Sprintf("%s %s %.2f%%", v.Name, fmtDur(v.Time), v.Pct)
		}))
		fmt.Fprintf(w, "%-9s %d requests  p50 %s  p99 %s  mean %s  (eBPF)\n", "BLOCK IO",
			b.BlockIO.Count, fmtDur(b.BlockIO.P50), fmtDur(b.BlockIO.P99), fmtDur(b.BlockIO.Mean))
	}
}

// fmtDur prints three significant digits at most.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case d < time.Millisecond:
		return trim(float64(d)/1e3) + "µs"
	case d < time.Second:
		return trim(float64(d)/1e6) + "ms"
	}
	return trim(d.Seconds()) + "s"
}

func trim(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtBytes uses SI units, as felix-loadgen's MB/s.
func fmtBytes(v float64) string {
	if v < 1000 {
		return fmt.Sprintf("%.0f B", v)
	}
	units := []string{"kB", "MB", "GB", "TB"}
	i := 0
	for v /= 1000; v >= 1000 && i < len(units)-1; i++ {
		v /= 1000
	}
	return trim(v) + " " + units[i]
}

func fmtRate(v float64) string { return fmtBytes(v) + "/s" }

func fmtCount(v float64) string {
	switch {
	case v >= 1e6:
		return trim(v/1e6) + "M"
	case v >= 1e3:
		return trim(v/1e3) + "k"
	}
	return fmt.Sprintf("%.0f", v)
}
