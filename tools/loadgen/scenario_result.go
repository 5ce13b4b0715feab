package main

import "time"

// ScenarioResult is everything a non-pubsub scenario measured; --json
// writes it.
type ScenarioResult struct {
	Tool        string          `json:"tool"`
	Scenario    string          `json:"scenario"`
	Started     time.Time       `json:"started"`
	Config      scenarioConfig  `json:"config"`
	Notes       []string        `json:"notes,omitempty"`
	Rounds      []ScenarioRound `json:"rounds"`
	Summary     ScenarioSummary `json:"summary"`
	Interrupted bool            `json:"interrupted,omitempty"`
}

// scenarioConfig is Config as a scenario's report shows it: only the
// fields the scenario reads are set.
type scenarioConfig struct {
	Addr      string  `json:"addr"`
	Admin     string  `json:"admin"`
	Tenant    string  `json:"tenant"`
	Namespace string  `json:"namespace"`
	Scenario  string  `json:"scenario"`
	Cache     string  `json:"cache,omitempty"`
	Durable   bool    `json:"durable"`
	Fsync     string  `json:"fsync,omitempty"`
	Op        string  `json:"op,omitempty"`
	ValueSize int     `json:"value_size_bytes,omitempty"`
	Keys      int     `json:"keys,omitempty"`
	Workers   int     `json:"workers,omitempty"`
	Watchers  int     `json:"watchers,omitempty"`
	Members   int     `json:"members,omitempty"`
	Consumers int     `json:"consumers,omitempty"`
	Shards    int     `json:"shards,omitempty"` // queue: shards of the stream drained
	Payload   *int    `json:"payload_bytes,omitempty"`
	Rate      float64 `json:"rate_per_s,omitempty"`
	Duration  string  `json:"duration,omitempty"`
	Count     int64   `json:"count,omitempty"`
	Warmup    string  `json:"warmup"`
	Repeat    int     `json:"repeat"`
}

func scenarioReportConfig(c *Config) scenarioConfig {
	r := scenarioConfig{
		Addr: c.Addr, Admin: c.Admin, Tenant: c.Tenant, Namespace: c.Namespace, Scenario: c.Scenario,
		Durable: c.Durable, Fsync: c.Fsync, Count: c.Count, Warmup: c.Warmup.String(), Repeat: c.Repeat,
	}
	if c.Duration > 0 {
		r.Duration = c.Duration.String()
	}
	switch c.Scenario {
	case "cache":
		r.Cache, r.Op, r.ValueSize, r.Keys, r.Workers = c.cacheName(), c.Op, c.ValueSize, c.Keys, c.Workers
	case "counter":
		r.Cache, r.Keys, r.Workers = c.cacheName(), c.Keys, c.Workers
	case "watch":
		r.Cache, r.ValueSize, r.Watchers, r.Rate = c.cacheName(), c.ValueSize, c.Watchers, c.Rate
	case "roster":
		r.Members = c.Members
	case "queue":
		r.Consumers, r.Payload, r.Shards = c.Consumers, &c.Payload, c.Shards
	}
	return r
}

// ScenarioRound is one round: per op type the measured count, rate and
// latency; the accounting checks (each must hold, or the run fails);
// extra counts (drops, redeliveries ...) that are reported, not judged.
type ScenarioRound struct {
	Round           int               `json:"round"`
	Interrupted     bool              `json:"interrupted,omitempty"`
	MeasuredSeconds float64           `json:"measured_s"`
	Ops             []OpResult        `json:"ops"`
	Checks          []Check           `json:"checks"`
	Counts          map[string]uint64 `json:"counts,omitempty"`
	Watchers        []WatcherResult   `json:"watchers,omitempty"`
	Errors          []string          `json:"errors,omitempty"`
}

// OpResult is one kind of op over a round's measured phase.
type OpResult struct {
	Op      string          `json:"op"`
	Count   uint64          `json:"count"`
	PerS    float64         `json:"per_s"`
	Seconds float64         `json:"seconds"`
	Latency *LatencySummary `json:"latency"`
}

// Check is an accounting check: Got must equal Want.
type Check struct {
	Name string `json:"name"`
	Got  int64  `json:"got"`
	Want int64  `json:"want"`
	OK   bool   `json:"ok"`
}

// OpSpread is an op's headline numbers over rounds.
type OpSpread struct {
	Op   string  `json:"op"`
	PerS *Spread `json:"per_s"`
	P50  *Spread `json:"p50_us,omitempty"`
	P99  *Spread `json:"p99_us,omitempty"`
}

// ScenarioSummary spreads each op's rate and latency over rounds and
// totals the failures.
type ScenarioSummary struct {
	Rounds       int        `json:"rounds"`
	Ops          []OpSpread `json:"ops"`
	ChecksFailed int        `json:"checks_failed"`
	Errors       int        `json:"errors"`
}

func (res *ScenarioResult) summarize() {
	s := ScenarioSummary{Rounds: len(res.Rounds)}
	var order []string
	rates, p50s, p99s := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for _, r := range res.Rounds {
		for _, op := range r.Ops {
			if _, seen := rates[op.Op]; !seen {
				order = append(order, op.Op)
			}
			rates[op.Op] = append(rates[op.Op], op.PerS)
			if op.Latency != nil {
				p50s[op.Op] = append(p50s[op.Op], op.Latency.P50)
				p99s[op.Op] = append(p99s[op.Op], op.Latency.P99)
			}
		}
		for _, c := range r.Checks {
			if !c.OK {
				s.ChecksFailed++
			}
		}
		s.Errors += len(r.Errors)
	}
	for _, op := range order {
		s.Ops = append(s.Ops, OpSpread{Op: op, PerS: spreadOf(rates[op]), P50: spreadOf(p50s[op]), P99: spreadOf(p99s[op])})
	}
	res.Summary = s
}
