package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// cliScenario runs a non-pubsub scenario for cli: table on stdout, --json
// to its file, exit 1 when a check failed or anything errored.
func cliScenario(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	res, err := runScenario(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "felix-loadgen: %v\n", err)
		if len(res.Rounds) == 0 {
			return exitFail
		}
	}
	writeScenarioTable(stdout, &res)
	if cfg.JSONFile != "" {
		b, jerr := json.MarshalIndent(&res, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(cfg.JSONFile, append(b, '\n'), 0o644)
		}
		if jerr != nil {
			fmt.Fprintf(stderr, "felix-loadgen: --json: %v\n", jerr)
			return exitFail
		}
	}
	if err != nil {
		return exitFail
	}
	if s := res.Summary; s.ChecksFailed > 0 || s.Errors > 0 {
		fmt.Fprintf(stderr, "felix-loadgen: FAILED: %d failed check(s), %d error(s)\n", s.ChecksFailed, s.Errors)
		for _, r := range res.Rounds {
			for _, c := range r.Checks {
				if !c.OK {
					fmt.Fprintf(stderr, "  round %d: %s: got %d, want %d\n", r.Round, c.Name, c.Got, c.Want)
				}
			}
			for _, e := range r.Errors {
				fmt.Fprintf(stderr, "  round %d: %s\n", r.Round, e)
			}
		}
		return exitFail
	}
	return exitOK
}

// scenarioHeadline describes the run in one line.
func scenarioHeadline(c scenarioConfig) string {
	unit := map[string]string{"cache": "iterations", "counter": "adds", "watch": "puts", "roster": "samples", "queue": "records"}[c.Scenario]
	bound := "for " + c.Duration
	if c.Count > 0 {
		bound = group(uint64(c.Count)) + " " + unit
	}
	dur := durability(c.Durable, c.Fsync)
	switch c.Scenario {
	case "cache":
		return fmt.Sprintf("cache %s (%s), op %s, %s × %d keys each, value %d B, %s", c.Cache, dur, c.Op,
			plural(c.Workers, "worker"), c.Keys, c.ValueSize, bound)
	case "counter":
		return fmt.Sprintf("cache %s (%s), %s over %d shared keys, %s", c.Cache, dur, plural(c.Workers, "worker"), c.Keys, bound)
	case "watch":
		return fmt.Sprintf("cache %s (%s), 1 writer at %s puts/s, %s, value %d B, %s", c.Cache, dur,
			group(uint64(c.Rate)), plural(c.Watchers, "watcher"), c.ValueSize, bound)
	case "roster":
		return fmt.Sprintf("%s members, late joiner %s", group(uint64(c.Members)), bound)
	case "queue":
		shards := "single-shard"
		if c.Shards > 1 {
			shards = fmt.Sprintf("%d-shard", c.Shards)
		}
		return fmt.Sprintf("%d B payloads on a %s %s stream, %s, %s", *c.Payload, dur, shards, plural(c.Consumers, "consumer"), bound)
	}
	return c.Scenario
}

// writeScenarioTable prints the final report of a scenario.
func writeScenarioTable(w io.Writer, res *ScenarioResult) {
	c := res.Config
	warm := ", after " + c.Warmup + " warm-up"
	if c.Scenario == "queue" {
		warm = "" // the drain is measured whole
	}
	fmt.Fprintf(w, "felix-loadgen: scenario %s: %s%s\n", c.Scenario, scenarioHeadline(c), warm)
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if res.Interrupted {
		fmt.Fprintf(w, "INTERRUPTED: round %d stopped early; its numbers cover what ran\n", len(res.Rounds))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\top\tcount\tper s\tp50 µs\tp90\tp99\tp999\tmax\t")
	for _, r := range res.Rounds {
		for _, op := range r.Ops {
			l := op.Latency
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Round, op.Op, group(op.Count), num(op.PerS),
				us(l, p50), us(l, p90), us(l, p99), us(l, p999), us(l, pmax))
		}
	}
	tw.Flush()
	writeBehind(w, res)
	fmt.Fprintln(w)
	writeChecks(w, res)
	if len(res.Rounds) > 1 {
		fmt.Fprintln(w)
		writeScenarioSummary(w, res)
	}
	if n := len(res.Rounds); n > 0 && len(res.Rounds[n-1].Watchers) > 0 {
		fmt.Fprintln(w)
		writeWatchers(w, &res.Rounds[n-1])
	}
}

// writeChecks prints each round's checks and extra counts.
func writeChecks(w io.Writer, res *ScenarioResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tcheck\tgot\twant\t\t")
	for _, r := range res.Rounds {
		for _, c := range r.Checks {
			verdict := "ok"
			if !c.OK {
				verdict = "FAILED"
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t\n", r.Round, c.Name, c.Got, c.Want, verdict)
		}
	}
	tw.Flush()
	for _, r := range res.Rounds {
		var parts []string
		for _, k := range slices.Sorted(mapKeys(r.Counts)) {
			parts = append(parts, k+" "+group(r.Counts[k]))
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "round %d: %s\n", r.Round, strings.Join(parts, ", "))
		}
		for _, e := range r.Errors {
			fmt.Fprintf(w, "round %d: error: %s\n", r.Round, e)
		}
	}
}

func mapKeys(m map[string]uint64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func writeScenarioSummary(w io.Writer, res *ScenarioResult) {
	s := res.Summary
	fmt.Fprintf(w, "over %d rounds:\n", s.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmin\tmedian\tmax\t")
	row := func(name string, sp *Spread) {
		if sp == nil {
			fmt.Fprintf(tw, "%s\tn/a\tn/a\tn/a\t\n", name)
			return
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, num(sp.Min), num(sp.Median), num(sp.Max))
	}
	for _, op := range s.Ops {
		row(op.Op+" per s", op.PerS)
		row(op.Op+" p50 µs", op.P50)
		row(op.Op+" p99 µs", op.P99)
	}
	tw.Flush()
	fmt.Fprintf(w, "failed checks %d, errors %d over all rounds\n", s.ChecksFailed, s.Errors)
}

// writeWatchers lists the watchers of the round (grouped when there are
// many, plus every one whose accounting is off).
func writeWatchers(w io.Writer, r *ScenarioRound) {
	fmt.Fprintf(w, "watchers (round %d): unaccounted = puts - delivered - dropped, must be 0\n", r.Round)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "watcher\tputs\tdelivered\tdropped\tgap reports\tunaccounted\tout of order\tp50 µs\t")
	row := func(name string, s WatcherResult) {
		p := "n/a"
		if s.DeliveryP50 != nil {
			p = strconv.FormatFloat(*s.DeliveryP50, 'f', 1, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", name, group(s.Puts), group(s.Delivered), group(s.Dropped),
			group(s.Gaps), s.Unaccounted, group(s.OutOfOrder), p)
	}
	if len(r.Watchers) <= maxListedSubscribers {
		for _, s := range r.Watchers {
			row(strconv.Itoa(s.ID), s)
		}
	} else {
		var sum WatcherResult
		for _, s := range r.Watchers {
			sum.Puts += s.Puts
			sum.Delivered += s.Delivered
			sum.Dropped += s.Dropped
			sum.Gaps += s.Gaps
			sum.Unaccounted += absInt(s.Unaccounted)
			sum.OutOfOrder += s.OutOfOrder
		}
		row(fmt.Sprintf("%d (sum)", len(r.Watchers)), sum)
		for _, s := range r.Watchers {
			if s.Unaccounted != 0 || s.Error != "" {
				row(strconv.Itoa(s.ID), s)
			}
		}
	}
	tw.Flush()
	for _, s := range r.Watchers {
		if s.Error != "" {
			fmt.Fprintf(w, "error: watcher %d: %s\n", s.ID, s.Error)
		}
	}
}

// writeBehind warns when the watch writer could not keep --rate: its puts
// then queue behind each other, and latency (from the paced slot) grows
// with the backlog rather than measuring one put and its delivery.
func writeBehind(w io.Writer, res *ScenarioResult) {
	if res.Config.Scenario != "watch" {
		return
	}
	for _, r := range res.Rounds {
		for _, op := range r.Ops {
			if op.Op == "put" && op.PerS < 0.9*res.Config.Rate {
				fmt.Fprintf(w, "warning: round %d: the writer kept %s of --rate %s puts/s: latencies include its backlog; lower --rate\n",
					r.Round, num(op.PerS), group(uint64(res.Config.Rate)))
			}
		}
	}
}
