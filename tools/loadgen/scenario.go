package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The scenarios besides pubsub: each lives in scenario_<name>.go
// as one function that runs a round. This file holds what they share: the
// round's clock and bounds, per-op histograms, accounting checks, the
// progress line and the rounds loop; scenario_result.go and
// scenario_report.go turn rounds into the summary, the table and the JSON.

// scenarioRound runs one round of a scenario.
type scenarioRoundFunc func(ctx context.Context, e *scenarioEnv) (ScenarioRound, error)

var scenarioRounds = map[string]scenarioRoundFunc{
	"cache":   cacheRound,
	"counter": counterRound,
	"watch":   watchRound,
	"roster":  rosterRound,
	"queue":   queueRound,
}

// scenarioEnv is the shared state of one round.
type scenarioEnv struct {
	cfg *Config
	n   int
	// tag is random per round; keys, rosters and queue streams are named
	// with it so that a round never sees what an earlier one left behind.
	tag uint32

	start, warmupEnd, end time.Time // end is zero when --count bounds the round
	draining              atomic.Bool
	// opCtx bounds each request: it ends --drain-timeout after the run's
	// ctx, so an interrupt lets requests in flight finish (see bindOps).
	opCtx context.Context
}

// bindOps sets opCtx from the run's ctx; the caller calls the returned
// function when the round is over.
func (e *scenarioEnv) bindOps(ctx context.Context) (release func()) {
	opCtx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(e.cfg.DrainTimeout, cancel) })
	e.opCtx = opCtx
	return func() { stop(); cancel() }
}

func newScenarioEnv(cfg *Config, n int) *scenarioEnv {
	return &scenarioEnv{cfg: cfg, n: n, tag: uint32(rand.N(1 << 16))}
}

// startClock starts the round's warm-up and measured phase. It is called
// once the connections are up, before any worker starts.
func (e *scenarioEnv) startClock() {
	e.start = time.Now()
	e.warmupEnd = e.start.Add(e.cfg.Warmup)
	if e.cfg.Count == 0 {
		e.end = e.warmupEnd.Add(e.cfg.Duration)
	}
}

// quota is worker i's share of --count over workers.
func (e *scenarioEnv) quota(i, workers int) int64 {
	n, w := e.cfg.Count, int64(workers)
	q := n / w
	if int64(i) < n%w {
		q++
	}
	return q
}

// budget bounds one worker's iterations: the warm-up, then its quota of
// --count or the rest of --duration.
type budget struct {
	e        *scenarioEnv
	quota    int64
	measured int64
}

func (e *scenarioEnv) budget(i, workers int) *budget {
	return &budget{e: e, quota: e.quota(i, workers)}
}

// next reports whether to start another iteration at now and whether it is
// measured (warm-up iterations are not).
func (b *budget) next(ctx context.Context, now time.Time) (ok, measured bool) {
	switch {
	case ctx.Err() != nil:
		return false, false
	case now.Before(b.e.warmupEnd):
		return true, false
	case b.e.cfg.Count > 0:
		if b.measured >= b.quota {
			return false, false
		}
		b.measured++
		return true, true
	}
	return now.Before(b.e.end), true
}

// opHist is one worker's latencies of one kind of op, measured phase only.
type opHist struct {
	hist Histogram
	last time.Time // completion of the last measured op
}

func (o *opHist) record(start, done time.Time) {
	o.hist.Record(int64(done.Sub(start)))
	if done.After(o.last) {
		o.last = done
	}
}

// mergeOps sums the workers' histograms of op into an OpResult, its rate
// over the measured phase (warm-up end to the last completion, as for
// pubsub's msg/s).
func (e *scenarioEnv) mergeOps(op string, hs []*opHist) OpResult {
	var h Histogram
	var last time.Time
	for _, o := range hs {
		h.Merge(&o.hist)
		if o.last.After(last) {
			last = o.last
		}
	}
	out := OpResult{Op: op, Count: h.Count(), Latency: h.Summary()}
	if d := last.Sub(e.warmupEnd); d > 0 {
		out.PerS = float64(h.Count()) / d.Seconds()
		out.Seconds = d.Seconds()
	}
	return out
}

// check is an accounting check: got must equal want.
func check(name string, got, want int64) Check {
	return Check{Name: name, Got: got, Want: want, OK: got == want}
}

// startProgress prints one line per second to cfg.Log, line giving the
// scenario's counters, until the returned function is called.
func (e *scenarioEnv) startProgress(line func() string) (stop func()) {
	if e.cfg.Log == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				phase := "run"
				if e.draining.Load() {
					phase = "drain"
				} else if now.Before(e.warmupEnd) {
					phase = "warmup"
				}
				fmt.Fprintf(e.cfg.Log, "[round %d] %5.0fs %-6s %s\n", e.n, now.Sub(e.start).Seconds(), phase, line())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// runScenario prepares what the scenario needs (its cache) and runs
// cfg.Repeat rounds, each with fresh connections. A ctx that ends stops the
// round early; it still reports (Interrupted).
func runScenario(ctx context.Context, cfg Config) (ScenarioResult, error) {
	res := ScenarioResult{Tool: "felix-loadgen", Scenario: cfg.Scenario, Started: time.Now(), Config: scenarioReportConfig(&cfg)}
	roundFn := scenarioRounds[cfg.Scenario]
	if cfg.Scenario == "cache" || cfg.Scenario == "counter" || cfg.Scenario == "watch" {
		notes, err := prepareCache(ctx, &cfg)
		if err != nil {
			return res, err
		}
		res.Notes = notes
		for _, n := range notes {
			cfg.logf("note: %s\n", n)
		}
	}
	for i := range cfg.Repeat {
		r, err := roundFn(ctx, newScenarioEnv(&cfg, i+1))
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i+1, err)
		}
		r.Round = i + 1
		if ctx.Err() != nil {
			r.Interrupted, res.Interrupted = true, true
		}
		res.Rounds = append(res.Rounds, r)
		if res.Interrupted {
			break
		}
	}
	res.summarize()
	return res, nil
}

// cacheSpec is the admin API's body of POST /v1/caches (broker.CacheSpec).
type cacheSpec struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Durable   bool   `json:"durable,omitempty"`
	Fsync     string `json:"fsync,omitempty"`
}

// prepareCache creates the cache (with --create) or leaves it to exist.
// An existing cache is used as it is, with a note when it differs from
// what the flags ask for.
func prepareCache(ctx context.Context, cfg *Config) ([]string, error) {
	a := newAdmin(cfg)
	if !cfg.Create {
		return nil, nil
	}
	if a == nil {
		return nil, fmt.Errorf("--create needs the admin API: pass --admin HOST:PORT or --create=false")
	}
	want := cacheSpec{Tenant: cfg.Tenant, Namespace: cfg.Namespace, Cache: cfg.cacheName(), Durable: cfg.Durable, Fsync: cfg.Fsync}
	created, err := a.post(ctx, "/v1/caches", "cache", want.Cache, want)
	if err != nil || created {
		return nil, err
	}
	var list struct {
		Caches []cacheSpec `json:"caches"`
	}
	if err := a.get(ctx, "/v1/caches", &list); err != nil {
		return []string{fmt.Sprintf("cache %s exists; admin API: %v", want.Cache, err)}, nil
	}
	for _, c := range list.Caches {
		if c.Tenant == want.Tenant && c.Namespace == want.Namespace && c.Cache == want.Cache &&
			(c.Durable != want.Durable || c.Durable && c.Fsync != want.Fsync) {
			return []string{fmt.Sprintf("cache %s exists, %s; using it as it is", c.Cache, durability(c.Durable, c.Fsync))}, nil
		}
	}
	return nil, nil
}
