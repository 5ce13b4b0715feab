package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
)

// The cache scenario: --workers workers, each on its own connection with
// one request outstanding, put and get their own --keys keys. Keys are
// per worker so that "a get after a put of the same key by the same worker
// returns that value" is a contract the broker must keep whatever the
// other workers do: a mismatch is a broker bug, not a race of the load.
//
// Value layout (big-endian): worker (4), key index (4), sequence (8), the
// rest zero. --op get and mixed first put every key once (not measured),
// so that every get has a value to expect.

// cacheWorker is one worker; its plain fields belong to its goroutine.
type cacheWorker struct {
	id  int
	c   *client.Client
	k   *client.Cache
	ops atomic.Uint64 // for progress

	put, get         opHist
	puts, gets       uint64 // every op, warm-up included
	mismatch, misses uint64
	seq              uint64
	expect           []uint64 // per key: sequence of the value last put; 0 none yet
	value            []byte
	err              error
}

func cacheKey(tag uint32, worker, key int) string {
	return fmt.Sprintf("lg%04x-w%d-k%d", tag, worker, key)
}

// fill writes the value of (key, seq) into w.value.
func (w *cacheWorker) fill(key int, seq uint64) []byte {
	binary.BigEndian.PutUint32(w.value[0:], uint32(w.id))
	binary.BigEndian.PutUint32(w.value[4:], uint32(key))
	binary.BigEndian.PutUint64(w.value[8:], seq)
	return w.value
}

func (w *cacheWorker) doPut(e *scenarioEnv, key int, measured bool) error {
	w.seq++
	start := time.Now()
	if err := w.k.Put(e.opCtx, cacheKey(e.tag, w.id, key), w.fill(key, w.seq), 0); err != nil {
		return fmt.Errorf("worker %d: put: %w", w.id, err)
	}
	if measured {
		w.put.record(start, time.Now())
	}
	w.expect[key] = w.seq
	w.puts++
	w.ops.Add(1)
	return nil
}

// doGet gets key and checks it holds what this worker last put.
func (w *cacheWorker) doGet(e *scenarioEnv, key int, measured bool) error {
	start := time.Now()
	v, found, err := w.k.Get(e.opCtx, cacheKey(e.tag, w.id, key))
	if err != nil {
		return fmt.Errorf("worker %d: get: %w", w.id, err)
	}
	if measured {
		w.get.record(start, time.Now())
	}
	w.gets++
	w.ops.Add(1)
	if want := w.expect[key]; want != 0 {
		switch {
		case !found:
			w.misses++
		case !bytes.Equal(v, w.fill(key, want)):
			w.mismatch++
		}
	}
	return nil
}

// run preloads (get, mixed), then works through its budget.
func (w *cacheWorker) run(ctx context.Context, e *scenarioEnv, b *budget) {
	cfg := e.cfg
	if cfg.Op == "get" || cfg.Op == "mixed" {
		for key := range cfg.Keys {
			if w.err = w.doPut(e, key, false); w.err != nil {
				return
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(e.tag), uint64(w.id)))
	for i := 0; ; i++ {
		ok, measured := b.next(ctx, time.Now())
		if !ok {
			return
		}
		key := i % cfg.Keys
		switch op := cfg.Op; {
		case op == "putget":
			if w.err = w.doPut(e, key, measured); w.err == nil {
				w.err = w.doGet(e, key, measured)
			}
		case op == "put" || op == "mixed" && rng.IntN(2) == 0:
			w.err = w.doPut(e, rng.IntN(cfg.Keys), measured)
		default:
			w.err = w.doGet(e, rng.IntN(cfg.Keys), measured)
		}
		if w.err != nil {
			if ctx.Err() != nil {
				w.err = nil // interrupted, not failed
			}
			return
		}
	}
}

func cacheRound(ctx context.Context, e *scenarioEnv) (ScenarioRound, error) {
	cfg := e.cfg
	release := e.bindOps(ctx)
	defer release()
	ws := make([]*cacheWorker, cfg.Workers)
	defer closeCacheWorkers(ws)
	err := forEach(len(ws), func(i int) error {
		w := &cacheWorker{id: i, expect: make([]uint64, cfg.Keys), value: make([]byte, cfg.ValueSize)}
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
		return "ops " + group(n)
	})
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, e, e.budget(i, len(ws))) }()
	}
	wg.Wait()
	stop()
	return cacheResult(e, ws), nil
}

func cacheResult(e *scenarioEnv, ws []*cacheWorker) ScenarioRound {
	var puts, gets []*opHist
	var r ScenarioRound
	var nPut, nGet, mismatch, misses uint64
	for _, w := range ws {
		puts, gets = append(puts, &w.put), append(gets, &w.get)
		nPut, nGet, mismatch, misses = nPut+w.puts, nGet+w.gets, mismatch+w.mismatch, misses+w.misses
		if w.err != nil {
			r.Errors = append(r.Errors, w.err.Error())
		}
	}
	for _, op := range []OpResult{e.mergeOps("put", puts), e.mergeOps("get", gets)} {
		if op.Count > 0 {
			r.Ops = append(r.Ops, op)
			r.MeasuredSeconds = max(r.MeasuredSeconds, op.Seconds)
		}
	}
	r.Checks = []Check{
		check("gets not returning the worker's last put", int64(mismatch), 0),
		check("gets finding no value after a put", int64(misses), 0),
	}
	r.Counts = map[string]uint64{"puts": nPut, "gets": nGet}
	return r
}

func closeCacheWorkers(ws []*cacheWorker) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, w := range ws {
		if w == nil {
			continue
		}
		if w.k != nil {
			w.k.Close(ctx)
		}
		if w.c != nil {
			w.c.Close()
		}
	}
}
