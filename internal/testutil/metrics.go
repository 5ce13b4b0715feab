package testutil

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a parsed Prometheus text exposition, by family name.
type Metrics map[string]*dto.MetricFamily

// Scrape GETs a /metrics endpoint (with an "Authorization: Bearer" header
// unless bearer is empty) and parses it; a failure fails the test.
func Scrape(t testing.TB, url, bearer string) Metrics {
	t.Helper()
	code, body := Call(t, http.MethodGet, url, "", bearer)
	if code != http.StatusOK {
		t.Fatalf("testutil.Scrape %s: status %d: %s", url, code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("testutil.Scrape %s: %v", url, err)
	}
	return fams
}

// Series returns the label sets of name's series, each as a map.
func (m Metrics) Series(name string) []map[string]string {
	f := m[name]
	if f == nil {
		return nil
	}
	out := make([]map[string]string, 0, len(f.Metric))
	for _, s := range f.Metric {
		l := map[string]string{}
		for _, p := range s.Label {
			l[p.GetName()] = p.GetValue()
		}
		out = append(out, l)
	}
	return out
}

// Value is the value of name's series whose labels include labels: a
// counter's or gauge's value, a histogram's count. ok is false when no
// series matches.
func (m Metrics) Value(name string, labels map[string]string) (v float64, ok bool) {
	f := m[name]
	if f == nil {
		return 0, false
	}
	for _, s := range f.Metric {
		if !hasLabels(s, labels) {
			continue
		}
		switch {
		case s.Counter != nil:
			return s.Counter.GetValue(), true
		case s.Gauge != nil:
			return s.Gauge.GetValue(), true
		case s.Histogram != nil:
			return float64(s.Histogram.GetSampleCount()), true
		case s.Untyped != nil:
			return s.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func hasLabels(s *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, p := range s.Label {
		have[p.GetName()] = p.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
