package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/internal/linux"
)

// storageCollector exports the segment logs' and commit sequencers' stats
// of every durable shard and durable cache, summed over the broker, at scrape time (the
// packages keep their own counters and import no metrics library).
type storageCollector struct{ b *Broker }

var (
	descStorage = map[string]*prometheus.Desc{
		"appends":   prometheus.NewDesc("felix_storage_appends_total", "Batches appended to durable logs.", nil, nil),
		"records":   prometheus.NewDesc("felix_storage_records_total", "Records appended to durable logs.", nil, nil),
		"bytes":     prometheus.NewDesc("felix_storage_bytes_total", "Bytes appended to durable logs, record headers included.", nil, nil),
		"rolls":     prometheus.NewDesc("felix_storage_segment_rolls_total", "Segments sealed and rolled.", nil, nil),
		"segments":  prometheus.NewDesc("felix_storage_segments", "Segment files held.", nil, nil),
		"retained":  prometheus.NewDesc("felix_storage_retained_bytes", "Bytes held by all segments.", nil, nil),
		"removed":   prometheus.NewDesc("felix_storage_retention_segments_removed_total", "Segments removed by retention.", nil, nil),
		"failed":    prometheus.NewDesc("felix_storage_failed_logs", "Logs in their terminal failed state (appends refused).", nil, nil),
		"truncated": prometheus.NewDesc("felix_storage_recovery_truncated_records", "Torn or repaired records removed at the last start.", nil, nil),
	}
	descDiskAvail      = prometheus.NewDesc("felix_storage_disk_available_bytes", "Bytes the broker may still write on the file system of FELIX_DATA_DIR (statfs; absent without a data directory or off Linux).", nil, nil)
	descDiskTotal      = prometheus.NewDesc("felix_storage_disk_size_bytes", "Size of the file system of FELIX_DATA_DIR.", nil, nil)
	descSyncs          = prometheus.NewDesc("felix_commit_syncs_total", "Successful group-commit syncs.", nil, nil)
	descSyncErrors     = prometheus.NewDesc("felix_commit_sync_errors_total", "Failed syncs (each is terminal for its log).", nil, nil)
	descWaitersPerSync = prometheus.NewDesc("felix_commit_waiters_per_sync", "Reservations (publish batches) released by one sync.", nil, nil)
	descRecordsPerSync = prometheus.NewDesc("felix_commit_records_per_sync", "Records covered by one sync.", nil, nil)
	descSyncLatency    = prometheus.NewDesc("felix_commit_sync_latency_seconds", "Duration of each sync.", nil, nil)
)

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descStorage {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{descSyncs, descSyncErrors, descWaitersPerSync, descRecordsPerSync, descSyncLatency, descDiskAvail, descDiskTotal} {
		ch <- d
	}
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	v := map[string]float64{}
	var syncs, syncErrors float64
	var waiters, records, latency commit.HistogramSnapshot
	for _, d := range c.b.durableLogs() {
		ls := d.log.Stats()
		v["appends"] += float64(ls.Appends)
		v["records"] += float64(ls.Records)
		v["bytes"] += float64(ls.Bytes)
		v["rolls"] += float64(ls.Rolls)
		v["segments"] += float64(ls.Segments)
		v["retained"] += float64(ls.RetainedBytes)
		v["removed"] += float64(ls.RemovedByRetention)
		v["truncated"] += float64(ls.Recovery.TruncatedRecords)
		if ls.Failed {
			v["failed"]++
		}
		cs := d.seq.Stats()
		syncs += float64(cs.Syncs)
		syncErrors += float64(cs.SyncErrors)
		waiters, records, latency = addHist(waiters, cs.WaitersPerSync), addHist(records, cs.RecordsPerSync), addHist(latency, cs.SyncLatency)
	}
	for name, d := range descStorage {
		kind := prometheus.CounterValue
		if name == "segments" || name == "retained" || name == "failed" || name == "truncated" {
			kind = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(d, kind, v[name])
	}
	ch <- prometheus.MustNewConstMetric(descSyncs, prometheus.CounterValue, syncs)
	ch <- prometheus.MustNewConstMetric(descSyncErrors, prometheus.CounterValue, syncErrors)
	ch <- constHistogram(descWaitersPerSync, waiters, 1, countBuckets)
	ch <- constHistogram(descRecordsPerSync, records, 1, countBuckets)
	ch <- constHistogram(descSyncLatency, latency, 1e-9, latencyBuckets)
	if dir := c.b.cfg.DataDir; dir != "" {
		if avail, total, err := linux.DiskSpace(dir); err == nil {
			ch <- prometheus.MustNewConstMetric(descDiskAvail, prometheus.GaugeValue, float64(avail))
			ch <- prometheus.MustNewConstMetric(descDiskTotal, prometheus.GaugeValue, float64(total))
		}
	}
}

func addHist(a, b commit.HistogramSnapshot) commit.HistogramSnapshot {
	a.Count += b.Count
	a.Sum += b.Sum
	for i := range a.Buckets {
		a.Buckets[i] += b.Buckets[i]
	}
	return a
}

// countBuckets are the exact bounds of commit's power-of-two buckets
// (2^i - 1) up to 65,535, for per-sync counts.
var countBuckets = func() []float64 {
	var out []float64
	for i := 1; i <= 16; i++ {
		out = append(out, float64(commit.BucketUpperBound(i)))
	}
	return out
}()

// constHistogram converts commit's power-of-two buckets (values scaled by
// scale, e.g. ns to seconds) into a Prometheus histogram with bounds: each
// power-of-two bucket counts under the first bound at or above its own
// upper bound (so no observation is counted below its value), or only in
// +Inf past the last bound.
func constHistogram(d *prometheus.Desc, h commit.HistogramSnapshot, scale float64, bounds []float64) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	j := 0
	var cum uint64
	for i, n := range h.Buckets {
		upper := float64(commit.BucketUpperBound(i)) * scale
		for j < len(bounds) && bounds[j] < upper {
			buckets[bounds[j]] = cum
			j++
		}
		cum += n
	}
	for ; j < len(bounds); j++ {
		buckets[bounds[j]] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, float64(h.Sum)*scale, buckets)
}

// durableLogs lists the logs of every durable shard and durable cache.
func (b *Broker) durableLogs() []*durableLog {
	var out []*durableLog
	for _, st := range b.streams.list() {
		for _, sh := range st.shards {
			if d := sh.durable(); d != nil {
				out = append(out, d.durableLog)
			}
		}
	}
	for _, c := range b.caches.list() {
		if c.d != nil {
			out = append(out, c.d)
		}
	}
	return out
}
