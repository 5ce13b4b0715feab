package commit

import (
	"runtime"
	"time"
)

// gatherYields bounds how many times gather yields without a new
// reservation before it gives up: released writers that are coming back do
// so within a yield or two of being made runnable.
const gatherYields = 8

// gather lets the writers released by the last sync re-stage before the
// next one starts. Without it, under steady concurrency the writers split
// into two halves that alternate: the half staged during a sync is synced
// at once when it returns, while the half it released is still waking up,
// so each sync covers about half of them (measured: 32 waiters per sync at
// concurrency 64, on_commit 14x concurrency 1). A timer cannot fix this
// cheaply: re-staging takes microseconds of CPU, while an idle Go runtime
// sleeps in ~1 ms steps (see Config.MaxDelay). Yielding the processor
// instead runs the just-readied writers (they sit on this P's run queue),
// and stops as soon as a yield brings no new reservation, so it costs a
// few hundred nanoseconds when nobody is coming back (concurrency 1). It
// never waits longer than half the last sync.
//
// Writers a network round trip away (a broker's clients) come back long
// after any gather: there the yields only delay the sync (measured on the
// durable cache, 8 writers pipelined on one connection: 24–34 µs per sync
// for 0.03–0.08 reservations). So gather runs only while its estimate
// says it pays (gatherEstimate.pays).
func (s *Sequencer) gather() {
	if s.lastReleased <= 1 {
		return
	}
	staged := s.staged()
	if !s.gatherEst.pays(staged, s.lastSync) {
		return
	}
	start := time.Now()
	gained := s.yieldForWriters(staged, s.lastReleased+staged, start.Add(s.lastSync/2))
	s.gatherEst.learn(gained, time.Since(start))
}

// staged returns how many reservations wait for the next sync.
func (s *Sequencer) staged() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.core.pending)
}

// yieldForWriters yields until want reservations are staged, gatherYields
// yields in a row bring none, or deadline passes; it returns how many were
// staged meanwhile.
func (s *Sequencer) yieldForWriters(staged, want int, deadline time.Time) int {
	first := staged
	for idle := 0; staged < want && idle < gatherYields && time.Now().Before(deadline); {
		runtime.Gosched()
		if n := s.staged(); n > staged {
			staged, idle = n, 0
		} else {
			idle++
		}
	}
	return staged - first
}

// gatherProbe: while gathering does not pay, every gatherProbe-th chance
// gathers anyway, so the estimate follows a change of load.
const gatherProbe = 16

// gatherEstimate is what recent gathers brought in and how long they took,
// as moving averages (weight 1/8). The flusher goroutine owns it.
type gatherEstimate struct {
	learned bool
	gained  float64 // reservations staged during a gather
	took    float64 // nanoseconds
	skipped int     // chances skipped since the last gather
}

// pays says whether to gather now, with staged reservations waiting for
// the sync: a reservation gathered is spared waiting out a whole next sync
// (about lastSync), while every staged one waits the gather out.
func (g *gatherEstimate) pays(staged int, lastSync time.Duration) bool {
	if !g.learned || g.gained*float64(lastSync) >= float64(max(staged, 1))*g.took {
		g.skipped = 0
		return true
	}
	g.skipped++
	if g.skipped >= gatherProbe {
		g.skipped = 0
		return true
	}
	return false
}

// learn folds in one gather's outcome.
func (g *gatherEstimate) learn(gained int, took time.Duration) {
	if !g.learned {
		g.learned, g.gained, g.took = true, float64(gained), float64(took)
		return
	}
	g.gained += (float64(gained) - g.gained) / 8
	g.took += (float64(took) - g.took) / 8
}
