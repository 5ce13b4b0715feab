package main

import (
	"cmp"
	"slices"
	"time"

	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/cpuprofile"
)

// Summary is a whole run: totals of counts, means and maxima of gauges and
// rates (means are over samples).
type Summary struct {
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Samples int       `json:"samples"`
	// Duration is the sum of the sample intervals.
	Duration    time.Duration    `json:"duration_ns"`
	Connections []ConnSummary    `json:"connections"`
	Streams     []StreamSummary  `json:"streams"`
	Process     *ProcessSummary  `json:"process,omitempty"`
	Threads     []ThreadSummary  `json:"threads,omitempty"`
	Commit      CommitSummary    `json:"commit"`
	Fanout      FanoutSummary    `json:"fanout"`
	Cluster     ClusterSummary   `json:"cluster"`
	Replicas    []ReplicaSummary `json:"replicas,omitempty"`
	System      *SystemSummary   `json:"system,omitempty"`
	BPF         *BPFSummary      `json:"bpf,omitempty"`
	Notes       []string         `json:"notes,omitempty"`

	// Accumulators behind the lists and quantiles above.
	conns    map[uint64]*ConnSummary
	streams  map[string]*StreamSummary
	replicas map[string]*ReplicaSummary
	threads  map[int]*ThreadSummary
	hists    [3]commit.HistogramSnapshot // waiters, records, latency
	blockIO  cpuprofile.BlockIOHist
}

// MeanMax is a gauge or rate over the run.
type MeanMax struct {
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	sum  float64
	n    int
}

func (m *MeanMax) add(v float64) {
	if m.n == 0 || v > m.Max {
		m.Max = v
	}
	m.n++
	m.sum += v
	m.Mean = m.sum / float64(m.n)
}

// ConnSummary is one connection over the samples that saw it.
type ConnSummary struct {
	ID               uint64        `json:"id"`
	Remote           string        `json:"remote"`
	Samples          int           `json:"samples"`
	RTTMean          time.Duration `json:"rtt_mean_ns"`
	RTTMax           time.Duration `json:"rtt_max_ns"`
	MTU              int           `json:"mtu"`
	Lost             uint64        `json:"lost"`
	CongestionEvents uint64        `json:"congestion_events"`
	BytesIn          uint64        `json:"bytes_in"`
	BytesOut         uint64        `json:"bytes_out"`
	BytesInRate      float64       `json:"bytes_in_per_s"`
	BytesOutRate     float64       `json:"bytes_out_per_s"`
	rtt              MeanMax
	seen             time.Duration
}

// ProcessSummary is the broker process's CPU, % of one CPU.
type ProcessSummary struct {
	CPU    MeanMax `json:"cpu_pct"`
	User   MeanMax `json:"user_pct"`
	System MeanMax `json:"system_pct"`
}

// ThreadSummary is one thread: its CPU time over the run, that time as % of
// one CPU over the run, and its busiest interval.
type ThreadSummary struct {
	TID     int           `json:"tid"`
	Name    string        `json:"name"`
	CPUTime time.Duration `json:"cpu_time_ns"`
	CPUMean float64       `json:"cpu_mean_pct"`
	CPUMax  float64       `json:"cpu_max_pct"`
}

// CommitSummary is group commit over the run; the quantiles are over every
// sync of the run, SyncP99Max is the worst interval's p99.
type CommitSummary struct {
	Syncs          uint64        `json:"syncs"`
	SyncsRate      MeanMax       `json:"syncs_per_s"`
	SyncErrors     uint64        `json:"sync_errors"`
	Records        uint64        `json:"records"`
	WaitersPerSync float64       `json:"waiters_per_sync"`
	RecordsPerSync float64       `json:"records_per_sync"`
	SyncMean       time.Duration `json:"sync_mean_ns"`
	SyncP50        time.Duration `json:"sync_p50_ns"`
	SyncP99        time.Duration `json:"sync_p99_ns"`
	SyncP99Max     time.Duration `json:"sync_p99_max_ns"`
}

// FanoutSummary is the subscriber queues over the run.
type FanoutSummary struct {
	MaxSubscriptions int     `json:"max_subscriptions"`
	MaxDepth         int     `json:"max_depth"`
	MaxDepthCapacity int     `json:"max_depth_capacity"`
	Drops            uint64  `json:"drops"`
	Delivered        uint64  `json:"delivered"`
	DeliveredRate    MeanMax `json:"delivered_per_s"`
}

// SystemSummary is the host's CPU split, % of all CPUs.
type SystemSummary struct {
	CPUs    int     `json:"cpus"`
	User    MeanMax `json:"user_pct"`
	System  MeanMax `json:"system_pct"`
	SoftIRQ MeanMax `json:"softirq_pct"`
	IOWait  MeanMax `json:"iowait_pct"`
	Idle    MeanMax `json:"idle_pct"`
}

// BPFSummary is the probes over the run: softirq totals per vector (Pct is
// the mean share of all CPUs) and block I/O over every request.
type BPFSummary struct {
	Samples int             `json:"samples"`
	Softirq []SoftirqSample `json:"softirq"`
	BlockIO BlockIOSample   `json:"block_io"`
}

func newSummary(started time.Time) *Summary {
	return &Summary{Started: started, conns: map[uint64]*ConnSummary{}, streams: map[string]*StreamSummary{}, threads: map[int]*ThreadSummary{}}
}

// add folds one sample in.
func (m *Summary) add(s *Sample) {
	m.Samples++
	m.Duration += s.Interval
	for _, c := range s.Connections {
		m.addConn(c, s.Interval)
	}
	m.addStreams(s)
	if s.Process != nil {
		if m.Process == nil {
			m.Process = &ProcessSummary{}
		}
		m.Process.CPU.add(s.Process.CPU)
		m.Process.User.add(s.Process.User)
		m.Process.System.add(s.Process.System)
	}
	for _, t := range s.Threads {
		ts := m.threads[t.TID]
		if ts == nil || ts.Name != t.Name {
			ts = &ThreadSummary{TID: t.TID, Name: t.Name}
			m.threads[t.TID] = ts
		}
		ts.CPUTime += time.Duration(t.CPU / 100 * float64(s.Interval))
		ts.CPUMax = max(ts.CPUMax, t.CPU)
	}
	m.addCommit(&s.Commit, s)
	f := &m.Fanout
	f.MaxSubscriptions = max(f.MaxSubscriptions, s.Fanout.Subscriptions)
	if f.MaxDepthCapacity == 0 || s.Fanout.MaxDepth > f.MaxDepth {
		f.MaxDepth, f.MaxDepthCapacity = s.Fanout.MaxDepth, s.Fanout.MaxDepthCapacity
	}
	f.Drops += s.Fanout.Drops
	f.Delivered += s.Fanout.Delivered
	f.DeliveredRate.add(s.Fanout.DeliveredRate)
	m.Cluster.add(&s.Cluster)
	m.addReplicas(s)
	if s.System != nil {
		if m.System == nil {
			m.System = &SystemSummary{}
		}
		m.System.CPUs = s.System.CPUs
		m.System.User.add(s.System.User)
		m.System.System.add(s.System.System)
		m.System.SoftIRQ.add(s.System.SoftIRQ)
		m.System.IOWait.add(s.System.IOWait)
		m.System.Idle.add(s.System.Idle)
	}
	m.addBPF(s)
}

func (m *Summary) addConn(c ConnSample, d time.Duration) {
	cs := m.conns[c.ID]
	if cs == nil {
		cs = &ConnSummary{ID: c.ID, Remote: c.Remote}
		m.conns[c.ID] = cs
	}
	cs.Samples++
	cs.seen += d
	cs.rtt.add(float64(c.RTT))
	cs.RTTMean, cs.RTTMax = time.Duration(cs.rtt.Mean), time.Duration(cs.rtt.Max)
	cs.MTU = c.MTU
	cs.Lost += c.Lost
	cs.CongestionEvents += c.CongestionEvents
	cs.BytesIn += c.BytesIn
	cs.BytesOut += c.BytesOut
	cs.BytesInRate, cs.BytesOutRate = perSecond(cs.BytesIn, cs.seen), perSecond(cs.BytesOut, cs.seen)
}

func (m *Summary) addCommit(c *CommitSample, s *Sample) {
	cs := &m.Commit
	cs.Syncs += c.Syncs
	cs.SyncsRate.add(c.SyncsRate)
	cs.SyncErrors += c.SyncErrors
	cs.Records += c.Records
	cs.SyncP99Max = max(cs.SyncP99Max, c.SyncP99)
	m.hists[0] = addHist(m.hists[0], s.waiters)
	m.hists[1] = addHist(m.hists[1], s.records)
	m.hists[2] = addHist(m.hists[2], s.syncLatency)
	cs.WaitersPerSync, cs.RecordsPerSync = m.hists[0].Mean(), m.hists[1].Mean()
	lat := m.hists[2]
	cs.SyncMean = time.Duration(lat.Mean())
	cs.SyncP50, cs.SyncP99 = time.Duration(lat.Quantile(0.5)), time.Duration(lat.Quantile(0.99))
}

func (m *Summary) addBPF(s *Sample) {
	if s.BPF == nil {
		return
	}
	if m.BPF == nil {
		m.BPF = &BPFSummary{Softirq: make([]SoftirqSample, len(s.BPF.Softirq))}
	}
	b := m.BPF
	b.Samples++
	for i, v := range s.BPF.Softirq {
		t := &b.Softirq[i]
		t.Name = v.Name
		t.Time += v.Time
		t.Count += v.Count
		t.Pct += (v.Pct - t.Pct) / float64(b.Samples) // running mean
	}
	m.blockIO = addBlockIO(m.blockIO, s.blockIO)
	b.BlockIO = blockIOSample(m.blockIO)
}

// finish fills the lists, busiest first, and stamps the end.
func (m *Summary) finish(ended time.Time) {
	m.Ended = ended
	m.Connections = m.Connections[:0]
	for _, c := range m.conns {
		m.Connections = append(m.Connections, *c)
	}
	slices.SortFunc(m.Connections, func(a, b ConnSummary) int {
		return cmp.Or(cmp.Compare(b.BytesIn+b.BytesOut, a.BytesIn+a.BytesOut), cmp.Compare(a.ID, b.ID))
	})
	m.finishStreams()
	m.finishReplicas()
	m.Threads = m.Threads[:0]
	for _, t := range m.threads {
		if m.Duration > 0 {
			t.CPUMean = 100 * float64(t.CPUTime) / float64(m.Duration)
		}
		m.Threads = append(m.Threads, *t)
	}
	slices.SortFunc(m.Threads, func(a, b ThreadSummary) int {
		return cmp.Or(cmp.Compare(b.CPUTime, a.CPUTime), cmp.Compare(a.TID, b.TID))
	})
}
