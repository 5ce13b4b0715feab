package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeResult(t *testing.T, dir, name string, cfg configReport, s Summary) string {
	t.Helper()
	raw, err := json.Marshal(Result{Tool: "felix-loadgen", Config: cfg, Summary: s})
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, raw, 0o644))
	return p
}

// TestReportDrawsBothCharts: report picks the axis the results vary
// along, prints the points and writes well-formed SVG with one line per
// series and a point per result.
func TestReportDrawsBothCharts(t *testing.T) {
	dir := t.TempDir()
	sp := func(lo, med, hi float64) *Spread { return &Spread{Min: lo, Median: med, Max: hi} }
	var fanout, pubs []string
	for i, subs := range []int{1, 10, 50} {
		for _, payload := range []int{0, 4096} {
			fanout = append(fanout, writeResult(t, dir, "f"+string(rune('a'+i))+sizeLabel(payload)+".json",
				configReport{Profile: "latency", Publishers: 1, Subscribers: subs, Payload: payload},
				Summary{MsgPerS: sp(1, 1, 1), MBPerS: sp(1, 1, 1), AckP50: sp(50, 60*float64(subs), 70*float64(subs)), AckP99: sp(1, 200*float64(subs), 1)}))
		}
	}
	for _, n := range []int{1, 2, 4, 8} {
		pubs = append(pubs, writeResult(t, dir, "p"+string(rune('0'+n))+".json",
			configReport{Profile: "throughput", Publishers: n, Subscribers: 1, Payload: 4096},
			Summary{MsgPerS: sp(1, 1, 1), MBPerS: sp(90*float64(n), 100*float64(n), 110*float64(n))}))
	}
	for _, tc := range []struct {
		files           []string
		title, name     string
		points, nseries int
	}{
		{fanout, "latency by fanout", "4 KiB payload", 6, 2},
		{pubs, "throughput by publishers", "4 KiB ephemeral", 4, 1},
		{pubs[:1], "throughput by publishers", "4 KiB ephemeral", 1, 1}, // one result without ack latency: the README's
	} {
		svg := filepath.Join(dir, "out.svg")
		var out, errb bytes.Buffer
		// As the README writes it: the files first, then the flags.
		require.Equal(t, exitOK, cliMain(t.Context(), append(append([]string{"report"}, tc.files...), "--svg", svg), &out, &errb), errb.String())
		require.Contains(t, out.String(), tc.title)
		raw, err := os.ReadFile(svg)
		require.NoError(t, err)
		dec := xml.NewDecoder(bytes.NewReader(raw))
		for {
			if _, err := dec.Token(); err != nil {
				require.Equal(t, "EOF", err.Error(), "SVG must be well-formed XML")
				break
			}
		}
		require.Equal(t, tc.points, strings.Count(string(raw), "<circle"))
		require.Equal(t, tc.nseries, strings.Count(string(raw), `stroke-width="2"/>`)/2) // polyline + legend line
		require.Contains(t, string(raw), tc.name)
	}
}

func TestReportErrors(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, exitUsage, cliMain(t.Context(), []string{"report"}, &out, &errb))
	require.Contains(t, errb.String(), "no RESULT.json given")
	bad := filepath.Join(t.TempDir(), "x.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"tool":"other"}`), 0o644))
	errb.Reset()
	require.Equal(t, exitUsage, cliMain(t.Context(), []string{"report", bad}, &out, &errb))
	require.Contains(t, errb.String(), "not a felix-loadgen result")
}
