/* Minimal declarations in place of vmlinux.h and libbpf's bpf_helpers.h.
 *
 * The probes read only fixed tracepoint fields and call four helpers, so a
 * page of declarations is enough. Keeping the build free of system headers
 * means the objects depend on nothing but the clang version, which is what
 * `make generate-check` relies on to compare them byte for byte.
 */
#ifndef FELIX_CPUPROFILE_COMMON_H
#define FELIX_CPUPROFILE_COMMON_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))

/* Hides what clang knows about var's range, so that a bounds check written
 * after it is emitted on the register the verifier sees (libbpf's macro). */
#define barrier_var(var) asm volatile("" : "+r"(var))

/* BTF-defined maps, as libbpf's bpf_helpers.h spells them: cilium/ebpf reads
 * the map attributes from these pointer types. */
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

/* enum bpf_map_type values from include/uapi/linux/bpf.h. */
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_LRU_HASH 9

#define BPF_ANY 0

/* Helper ids from include/uapi/linux/bpf.h (___BPF_FUNC_MAPPER order). None
 * of them is GPL-only, which is why the license string can be the project's. */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key,
				   const void *value, __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;

/* The common header of every tracepoint record (the common_* lines of each
 * events/<group>/<name>/format file); the event fields start at offset 8. */
struct trace_entry {
	__u16 common_type;
	__u8 common_flags;
	__u8 common_preempt_count;
	__s32 common_pid;
};

#endif
