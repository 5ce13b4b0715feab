// SPDX-License-Identifier: Apache-2.0
/* Time spent in each softirq vector, per CPU.
 *
 * Softirqs do not nest on a CPU (__do_softirq in kernel/softirq.c runs the
 * pending vectors one after another with further softirqs disabled), so one
 * start timestamp per CPU and vector pairs every exit with its entry, and the
 * per-CPU maps need no atomics.
 */
#include "common.h"

/* NR_SOFTIRQS in include/linux/interrupt.h: hi, timer, net_tx, net_rx, block,
 * irq_poll, tasklet, sched, hrtimer, rcu. */
#define NR_SOFTIRQS 10

/* events/irq/softirq_entry/format and softirq_exit/format: one unsigned int
 * vec at offset 8, unchanged since the tracepoints appeared in Linux 2.6.37. */
struct softirq_args {
	struct trace_entry ent;
	__u32 vec;
};

struct softirq_stat {
	__u64 time_ns;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQS);
	__type(key, __u32);
	__type(value, __u64);
} softirq_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQS);
	__type(key, __u32);
	__type(value, struct softirq_stat);
} softirq_stats SEC(".maps");

SEC("tracepoint/irq/softirq_entry")
int softirq_entry(struct softirq_args *ctx)
{
	__u32 vec = ctx->vec;
	__u64 *start;

	if (vec >= NR_SOFTIRQS)
		return 0;
	start = bpf_map_lookup_elem(&softirq_start, &vec);
	if (start)
		*start = bpf_ktime_get_ns();
	return 0;
}

SEC("tracepoint/irq/softirq_exit")
int softirq_exit(struct softirq_args *ctx)
{
	__u32 vec = ctx->vec;
	struct softirq_stat *stat;
	__u64 *start;

	if (vec >= NR_SOFTIRQS)
		return 0;
	start = bpf_map_lookup_elem(&softirq_start, &vec);
	/* Zero means the entry ran before the probe was attached. */
	if (!start || *start == 0)
		return 0;
	stat = bpf_map_lookup_elem(&softirq_stats, &vec);
	if (stat) {
		stat->time_ns += bpf_ktime_get_ns() - *start;
		stat->count++;
	}
	*start = 0;
	return 0;
}

char LICENSE[] SEC("license") = "Apache-2.0";
