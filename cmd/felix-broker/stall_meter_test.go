package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// stallMeter records how late a 5 ms ticker of the test process fires.
// This process relays every message between brokers (the impairment
// proxies) and runs the publishers and the control plane: while it does
// not run, acks pause however the brokers hand over, and a gap that a
// stall as long covers is the machine's, not the hand-off's.
type stallMeter struct {
	mu     sync.Mutex
	stalls []stall // ticks more than 20 ms late
}

type stall struct {
	at   time.Time // when the late tick fired
	late time.Duration
}

func meterStalls(t *testing.T) *stallMeter {
	m := &stallMeter{}
	const every = 5 * time.Millisecond
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		prev := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				now := time.Now()
				if late := now.Sub(prev) - every; late > 20*time.Millisecond {
					m.mu.Lock()
					m.stalls = append(m.stalls, stall{now, late})
					m.mu.Unlock()
				}
				prev = now
			}
		}
	}()
	return m
}

// longest is the longest stall that ended between from and to.
func (m *stallMeter) longest(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, s := range m.stalls {
		if !s.at.Before(from) && !s.at.After(to) {
			d = max(d, s.late)
		}
	}
	return d
}

// meterDisk records how long a 4 KiB write and fsync in dir takes,
// every 10 ms, when it takes over 20 ms. The brokers of a test share one
// disk (and, on a virtual machine, the host's): while its syncs stall,
// every replica's do, no quorum forms, and acks pause however the brokers
// hand over. Measured idle on the 2-vCPU machine: 30 of 4,888 probes
// over 50 ms, the longest 323 ms.
func meterDisk(t *testing.T, dir string) *stallMeter {
	m := &stallMeter{}
	f, err := os.Create(filepath.Join(dir, "disk-probe"))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done; f.Close() })
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			start := time.Now()
			if _, err := f.WriteAt(buf, 0); err == nil {
				_ = f.Sync()
			}
			if took := time.Since(start); took > 20*time.Millisecond {
				m.mu.Lock()
				m.stalls = append(m.stalls, stall{time.Now(), took})
				m.mu.Unlock()
			}
		}
	}()
	return m
}
