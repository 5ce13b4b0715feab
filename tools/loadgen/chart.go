package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/felixmq/felix/internal/cli"
)

const reportUsage = `usage: felix-loadgen report RESULT.json... [--svg OUT.svg] [--chart fanout|publishers]
Draws the published Felix pages' charts from --json results: ack latency
(p50, with p99 dashed) against fanout, one line per payload; or throughput
(median MB/s, min-max whiskers) against publishers, one line per payload and
durability. Without --chart it picks the axis the results vary along, and
the throughput chart for results without ack latency (--ack none). Prints
the points as a table too.`

// point is one result on a chart: x, the median y and its spread.
type point struct {
	x             int
	y, ylo, yhi   float64
	y2            float64 // the dashed companion line (p99), 0 if none
	series, label string
}

// chart is what report draws.
type chart struct {
	title, xLabel, yLabel string
	logY                  bool
	points                []point
}

func runReport(args []string, stdout, stderr io.Writer) int {
	set := flag.NewFlagSet("felix-loadgen report", flag.ContinueOnError)
	svgOut := set.String("svg", "", "write the chart to `FILE`")
	kind := set.String("chart", "", "fanout or publishers (default: what the results vary along)")
	files, err := cli.Parse(set, args)
	if err != nil {
		return cli.Fail(err, "felix-loadgen report", reportUsage, set, stdout, stderr)
	}
	results, err := loadResults(files)
	if err == nil {
		var c chart
		if c, err = buildChart(results, *kind); err == nil {
			writePoints(stdout, c)
			if *svgOut != "" {
				err = os.WriteFile(*svgOut, []byte(renderSVG(c)), 0o644)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "felix-loadgen report: %v\n", err)
		return exitUsage
	}
	return exitOK
}

func loadResults(files []string) ([]Result, error) {
	if len(files) == 0 {
		return nil, errors.New("no RESULT.json given")
	}
	out := make([]Result, 0, len(files))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r Result
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if r.Tool != "felix-loadgen" || r.Summary.MsgPerS == nil {
			return nil, fmt.Errorf("%s: not a felix-loadgen result with a summary", f)
		}
		out = append(out, r)
	}
	return out, nil
}

// buildChart turns results into the fanout or the publishers chart.
func buildChart(rs []Result, kind string) (chart, error) {
	if kind == "" {
		kind = "fanout"
		for _, r := range rs {
			if r.Config.Publishers != rs[0].Config.Publishers || r.Summary.AckP50 == nil {
				kind = "publishers"
			}
		}
	}
	var c chart
	switch kind {
	case "fanout":
		c = chart{title: "Acked publish latency by fanout", xLabel: "subscribers", yLabel: "ack latency µs, log scale (p50; p99 dashed)", logY: true}
		for _, r := range rs {
			s := r.Summary
			if s.AckP50 == nil {
				return c, fmt.Errorf("a result without ack latency (--ack none?) cannot go on the fanout chart")
			}
			p := point{x: r.Config.Subscribers, y: s.AckP50.Median, ylo: s.AckP50.Min, yhi: s.AckP50.Max,
				series: fmt.Sprintf("%s payload", sizeLabel(r.Config.Payload))}
			if s.AckP99 != nil {
				p.y2 = s.AckP99.Median
			}
			c.points = append(c.points, p)
		}
	case "publishers":
		c = chart{title: "Ingest throughput by publishers", xLabel: "publishers", yLabel: "MB/s (median, min-max)"}
		for _, r := range rs {
			m := r.Summary.MBPerS
			durability := "ephemeral"
			if r.Config.Durable {
				durability = "durable " + r.Config.Fsync
			}
			c.points = append(c.points, point{x: r.Config.Publishers, y: m.Median, ylo: m.Min, yhi: m.Max,
				series: fmt.Sprintf("%s %s", sizeLabel(r.Config.Payload), durability)})
		}
	default:
		return c, fmt.Errorf("--chart %q: want fanout or publishers", kind)
	}
	slices.SortStableFunc(c.points, func(a, b point) int {
		if a.series != b.series {
			return strings.Compare(a.series, b.series)
		}
		return a.x - b.x
	})
	return c, nil
}

func sizeLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func writePoints(w io.Writer, c chart) {
	fmt.Fprintf(w, "%s\n%-24s %8s %12s %12s %12s %12s\n", c.title, "series", c.xLabel, "median", "min", "max", "p99")
	for _, p := range c.points {
		fmt.Fprintf(w, "%-24s %8d %12.1f %12.1f %12.1f %12.1f\n", p.series, p.x, p.y, p.ylo, p.yhi, p.y2)
	}
}
