// SPDX-License-Identifier: Apache-2.0
/* Block request latency, issue to completion, as a log2 histogram of
 * microseconds.
 *
 * A request is matched across the two tracepoints by (dev, sector), the
 * fields both records carry: the stable tracepoints do not expose the
 * struct request pointer. Requests issued before the probe was attached, or
 * evicted from the LRU map, complete unmatched and are not counted.
 */
#include "common.h"

/* Slot i counts latencies of [2^i, 2^(i+1)) microseconds, except that slot
 * 0 holds [0, 2) and the last slot everything longer. */
#define BLOCKIO_SLOTS 32

/* events/block/block_rq_issue/format and block_rq_complete/format: dev_t dev
 * (4 bytes) at offset 8 and sector_t sector at offset 16 in both. Later
 * fields moved between kernel versions (ioprio was inserted before rwbs),
 * which is why only these two are declared. */
struct block_rq_args {
	struct trace_entry ent;
	__u32 dev;
	__u32 pad;
	__u64 sector;
};

struct rq_key {
	__u32 dev;
	__u32 pad;
	__u64 sector;
};

struct blockio_hist {
	__u64 slots[BLOCKIO_SLOTS];
	__u64 count;
	__u64 total_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct rq_key);
	__type(value, __u64);
} blockio_start SEC(".maps");

/* Per CPU, so concurrent completions on different CPUs need no atomics; the
 * reader sums the copies. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct blockio_hist);
} blockio_hists SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xffffffffULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xffff) << 4; v >>= shift; r |= shift;
	shift = (v > 0xff) << 3; v >>= shift; r |= shift;
	shift = (v > 0xf) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

SEC("tracepoint/block/block_rq_issue")
int block_rq_issue(struct block_rq_args *ctx)
{
	struct rq_key key = {.dev = ctx->dev, .pad = 0, .sector = ctx->sector};
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&blockio_start, &key, &now, BPF_ANY);
	return 0;
}

SEC("tracepoint/block/block_rq_complete")
int block_rq_complete(struct block_rq_args *ctx)
{
	struct rq_key key = {.dev = ctx->dev, .pad = 0, .sector = ctx->sector};
	struct blockio_hist *hist;
	__u64 *start, delta;
	__u32 zero = 0, slot;

	start = bpf_map_lookup_elem(&blockio_start, &key);
	if (!start)
		return 0;
	delta = bpf_ktime_get_ns() - *start;
	bpf_map_delete_elem(&blockio_start, &key);

	hist = bpf_map_lookup_elem(&blockio_hists, &zero);
	if (!hist)
		return 0;
	slot = log2_u64(delta / 1000);
	if (slot >= BLOCKIO_SLOTS)
		slot = BLOCKIO_SLOTS - 1;
	/* The verifier loses the bound through log2's shifts and ORs, and clang
	 * would drop a mask it can prove redundant. */
	barrier_var(slot);
	hist->slots[slot & (BLOCKIO_SLOTS - 1)]++;
	hist->count++;
	hist->total_ns += delta;
	return 0;
}

char LICENSE[] SEC("license") = "Apache-2.0";
