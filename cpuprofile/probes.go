package cpuprofile

import "time"

// NumSoftirqs is NR_SOFTIRQS of include/linux/interrupt.h.
const NumSoftirqs = 10

// softirqNames follow softirq_to_name in kernel/softirq.c, lower-cased.
var softirqNames = [NumSoftirqs]string{
	"hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu",
}

// SoftirqName returns the name of softirq vector vec ("net_rx" for 3), or ""
// outside 0..NumSoftirqs-1.
func SoftirqName(vec int) string {
	if vec < 0 || vec >= NumSoftirqs {
		return ""
	}
	return softirqNames[vec]
}

// SoftirqVector is the time one CPU spent in one softirq vector, and how
// many times it ran it, since the probes were opened.
type SoftirqVector struct {
	Name  string        `json:"name"`
	Time  time.Duration `json:"time_ns"`
	Count uint64        `json:"count"`
}

// SoftirqCPU is the softirq account of one CPU, indexed by vector number.
type SoftirqCPU struct {
	CPU     int                        `json:"cpu"`
	Vectors [NumSoftirqs]SoftirqVector `json:"vectors"`
}

// BlockIOSlots is the number of histogram slots in BlockIOHist.
const BlockIOSlots = 32

// BlockIOHist is the latency of block requests, issue to completion, since
// the probes were opened, for every block device.
type BlockIOHist struct {
	Count uint64        `json:"count"`
	Total time.Duration `json:"total_ns"`
	// Slots[i] counts requests whose latency in microseconds is in
	// BlockIOSlotRange(i): powers of two, as bcc's biolatency prints them.
	Slots [BlockIOSlots]uint64 `json:"slots"`
}

// BlockIOSlotRange returns the latencies slot i of BlockIOHist counts,
// lo inclusive, hi exclusive; the last slot is open-ended (hi 0).
func BlockIOSlotRange(i int) (lo, hi time.Duration) {
	switch {
	case i < 0 || i >= BlockIOSlots:
		return 0, 0
	case i == 0:
		return 0, 2 * time.Microsecond
	case i == BlockIOSlots-1:
		return time.Microsecond << i, 0
	}
	return time.Microsecond << i, time.Microsecond << (i + 1)
}

// Sub returns the requests completed between prev and h, two readings of the
// same Probes.
func (h BlockIOHist) Sub(prev BlockIOHist) BlockIOHist {
	d := BlockIOHist{Count: h.Count - prev.Count, Total: h.Total - prev.Total}
	for i := range d.Slots {
		d.Slots[i] = h.Slots[i] - prev.Slots[i]
	}
	return d
}

// SubSoftirq returns the softirq time and counts between prev and cur, two
// readings of the same Probes.
func SubSoftirq(cur, prev []SoftirqCPU) []SoftirqCPU {
	d := make([]SoftirqCPU, len(cur))
	for i, c := range cur {
		d[i] = c
		if i >= len(prev) {
			continue
		}
		for v := range c.Vectors {
			d[i].Vectors[v].Time -= prev[i].Vectors[v].Time
			d[i].Vectors[v].Count -= prev[i].Vectors[v].Count
		}
	}
	return d
}
