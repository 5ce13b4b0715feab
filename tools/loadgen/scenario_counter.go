package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
)

// The counter scenario: --workers workers, each on its own connection with
// one request outstanding, counter_add random deltas (-9..9, so signs mix)
// to --keys keys they all share: contention on a key is the point. Each
// worker sums the deltas the broker acknowledged, per key. At the end one
// counter_get per key must read exactly the sum over workers (warm-up
// included): an acked add that is lost or applied twice shows up here.
// Keys are named for the round, so every round starts from absent (0).

// counterWorker is one worker; its plain fields belong to its goroutine.
type counterWorker struct {
	id  int
	c   *client.Client
	k   *client.Cache
	ops atomic.Uint64

	add  opHist
	adds uint64
	sums []int64 // per key: acknowledged deltas
	err  error
}

func counterKey(tag uint32, key int) string { return fmt.Sprintf("lg%04x-c%d", tag, key) }

func (w *counterWorker) run(ctx context.Context, e *scenarioEnv, b *budget) {
	rng := rand.New(rand.NewPCG(uint64(e.tag), uint64(w.id)))
	for i := 0; ; i++ {
		ok, measured := b.next(ctx, time.Now())
		if !ok {
			return
		}
		// Workers start on different keys and walk them all.
		key := (w.id + i) % len(w.sums)
		delta := int64(rng.IntN(19) - 9)
		start := time.Now()
		if _, err := w.k.CounterAdd(e.opCtx, counterKey(e.tag, key), delta); err != nil {
			if ctx.Err() == nil {
				// The add may or may not have been applied: the sum
				// check below can no longer be exact.
				w.err = fmt.Errorf("worker %d: counter_add: %w", w.id, err)
			}
			return
		}
		if measured {
			w.add.record(start, time.Now())
		}
		w.sums[key] += delta
		w.adds++
		w.ops.Add(1)
	}
}

func counterRound(ctx context.Context, e *scenarioEnv) (ScenarioRound, error) {
	cfg := e.cfg
	release := e.bindOps(ctx)
	defer release()
	ws := make([]*counterWorker, cfg.Workers)
	defer func() {
		for _, w := range ws {
			if w != nil && w.c != nil {
				w.c.Close()
			}
		}
	}()
	err := forEach(len(ws), func(i int) error {
		w := &counterWorker{id: i, sums: make([]int64, cfg.Keys)}
		ws[i] = w
		var err error
		if w.k, err = openCache(ctx, cfg, &w.c); err != nil {
			return fmt.Errorf("worker %d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return ScenarioRound{}, err
	}
	e.startClock()
	stop := e.startProgress(func() string {
		var n uint64
		for _, w := range ws {
			n += w.ops.Load()
		}
		return "counter_add " + group(n)
	})
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, e, e.budget(i, len(ws))) }()
	}
	wg.Wait()
	e.draining.Store(true)
	stop()
	return counterResult(e, ws), nil
}

// counterResult reads every key back and checks it against the acked sums.
func counterResult(e *scenarioEnv, ws []*counterWorker) ScenarioRound {
	var r ScenarioRound
	var adds []*opHist
	want := make([]int64, e.cfg.Keys)
	var total uint64
	for _, w := range ws {
		adds = append(adds, &w.add)
		total += w.adds
		for k, s := range w.sums {
			want[k] += s
		}
		if w.err != nil {
			r.Errors = append(r.Errors, w.err.Error())
		}
	}
	r.Ops = append(r.Ops, e.mergeOps("counter_add", adds))
	r.MeasuredSeconds = r.Ops[0].Seconds
	var get Histogram
	var off, gotSum, wantSum int64
	start := time.Now()
	for k, wk := range want {
		t := time.Now()
		v, err := ws[0].k.CounterGet(e.opCtx, counterKey(e.tag, k))
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("counter_get %s: %v", counterKey(e.tag, k), err))
			off++
			continue
		}
		get.Record(int64(time.Since(t)))
		if v != wk {
			off++
			if off <= 5 {
				r.Errors = append(r.Errors, fmt.Sprintf("counter %s reads %d, acked deltas sum to %d", counterKey(e.tag, k), v, wk))
			}
		}
		gotSum, wantSum = gotSum+v, wantSum+wk
	}
	// The read-back is sequential, one key at a time: its rate is that of
	// one client with one request outstanding.
	verify := OpResult{Op: "counter_get (read-back)", Count: get.Count(), Latency: get.Summary(), Seconds: time.Since(start).Seconds()}
	if verify.Seconds > 0 {
		verify.PerS = float64(verify.Count) / verify.Seconds
	}
	r.Ops = append(r.Ops, verify)
	r.Checks = []Check{
		check("keys whose counter_get differs from the acked deltas", off, 0),
		check("sum of counter_get over keys minus acked deltas", gotSum-wantSum, 0),
	}
	r.Counts = map[string]uint64{"counter_adds acked": total}
	return r
}
