package commit

import "sync/atomic"

// Stats is a snapshot of a Sequencer's counters. The broker exports them;
// this package does not import a metrics library.
type Stats struct {
	Syncs      uint64 // Syncer.Sync calls that succeeded
	SyncErrors uint64 // Syncer.Sync calls that failed (at most 1: failure is terminal)
	// Reservations and Records count completed reservations and the records
	// they covered (end-first), with or without error; Failed counts the
	// reservations completed with an error.
	Reservations uint64
	Records      uint64
	Failed       uint64
	// RecordsPerSync is, per successful sync, the records reserved since the
	// previous one (tail minus the previous durable tail).
	RecordsPerSync HistogramSnapshot
	// WaitersPerSync is, per successful sync, the reservations it released.
	// It is 0 in Periodic and Never modes, whose reservations never wait.
	WaitersPerSync HistogramSnapshot
	// SyncLatency is the duration of each Sync call, successful or not, in
	// nanoseconds.
	SyncLatency HistogramSnapshot
}

// stats is the live form of Stats: typed atomics written by the flusher
// goroutine and read by Stats.
type stats struct {
	syncs, syncErrors              atomic.Uint64
	reservations, records, failed  atomic.Uint64
	recordsPerSync, waitersPerSync Histogram
	syncLatency                    Histogram
}

func (s *stats) snapshot() Stats {
	return Stats{
		Syncs:          s.syncs.Load(),
		SyncErrors:     s.syncErrors.Load(),
		Reservations:   s.reservations.Load(),
		Records:        s.records.Load(),
		Failed:         s.failed.Load(),
		RecordsPerSync: s.recordsPerSync.Snapshot(),
		WaitersPerSync: s.waitersPerSync.Snapshot(),
		SyncLatency:    s.syncLatency.Snapshot(),
	}
}
