/*
 * cuda_alloc — PyTorch's CUDA caching allocator (the native backend) as a
 * replay: the requests and frees of one device, in order, and what the
 * allocator would have reserved from the driver, how it split and merged
 * its blocks and when it would have run out of memory. No GPU is needed;
 * the rules are c10/cuda/CUDACachingAllocator.cpp and
 * c10/cuda/CUDAAllocatorConfig.cpp of PyTorch v2.6.0 (the release tarball
 * pytorch-v2.6.0 as Debian ships it, pytorch_2.6.0+dfsg.orig.tar.xz,
 * sha256 099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff);
 * every rule in cuda_alloc.c names its lines there, and docs/schedule.md
 * ("The GPU's caching allocator") lists them.
 *
 * What is modelled: one device and ONE stream (PyTorch keys its free
 * blocks by (stream, size); a trace on one stream never meets another
 * stream's blocks, so record_stream, collectives on side streams and the
 * cross-stream events are not modelled), no CUDA graph capture and its
 * private pools, no IPC (so the free-memory callbacks free nothing). The
 * options are PYTORCH_CUDA_ALLOC_CONF's, parsed from that string by
 * cuda_alloc_parse_conf; torch.cuda.set_per_process_memory_fraction is
 * opts.memory_fraction (garbage_collection_threshold acts only under it,
 * as in PyTorch). cuda_alloc_empty_cache is torch.cuda.empty_cache: the
 * replay never empties the cache on its own.
 *
 * Ownership: cuda_alloc_create allocates the state, cuda_alloc_destroy
 * releases it and everything in it; no static state, every list grows
 * with the trace. Out of host memory is fatal (util.h, zs_malloc).
 */
#ifndef ZS_UTIL_CUDA_ALLOC_H
#define ZS_UTIL_CUDA_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#define CUDA_ALLOC_MIB ((uint64_t)1 << 20)
/* CUDAAllocatorConfig.cpp 11: roundup_power2_divisions has one value for
 * each power-of-two interval from 1 MiB to 64 GiB. */
#define CUDA_ALLOC_DIV_INTERVALS 16

/* The release the rules are written from (cuda_alloc.c cites its lines). */
#define CUDA_ALLOC_TORCH_RELEASE "2.6.0"

struct cuda_alloc_opts {
	uint64_t max_split_size;              /* bytes; UINT64_MAX = unset (the default) */
	uint64_t max_non_split_rounding_size; /* bytes; 20 MiB by default */
	uint64_t roundup_divisions[CUDA_ALLOC_DIV_INTERVALS]; /* 0 = off (the default) */
	int expandable_segments;              /* expandable_segments:True */
	double gc_threshold;                  /* garbage_collection_threshold; 0 = off */
	/* torch.cuda.set_per_process_memory_fraction: 0 = never called; else
	 * (0, 1], and the replay needs a device size. Not part of
	 * PYTORCH_CUDA_ALLOC_CONF: the caller sets it. */
	double memory_fraction;
	/* The cuBLAS workspace (bytes; 0 = none) a replay of a step asks for
	 * once, at the step's first matmul, and never frees. Not the
	 * allocator's own option (cuda_alloc ignores it): the callers that make
	 * the trace place the request (docs/schedule.md, "The replay in
	 * measure"); the default is PyTorch 2.6's on sm_90. */
	uint64_t cublas_workspace;
};

/* PyTorch 2.6.0's default cuBLAS workspace (CublasHandlePool.cpp 133-134,
 * the release tarball docs/schedule.md names): 4096 KiB x 8 on sm_90
 * (H100, H200), 4096 KiB x 2 + 16 KiB x 8 on other GPUs. */
#define CUDA_ALLOC_CUBLAS_WORKSPACE_SM90 (UINT64_C(4096) * 8 * 1024)
#define CUDA_ALLOC_CUBLAS_WORKSPACE_OTHER (UINT64_C(4096) * 1024 * 2 + UINT64_C(16) * 1024 * 8)
/* The workspace's id in a replay (and a timeline's "workspace" event):
 * no trace's block takes it, their ids count up from 1. */
#define CUDA_ALLOC_WORKSPACE_ID UINT64_C(0)

/* The defaults, as CUDAAllocatorConfig's constructor (13-24) sets them. */
void cuda_alloc_opts_default(struct cuda_alloc_opts *o);

/* Parse a PYTORCH_CUDA_ALLOC_CONF value ("expandable_segments:True,
 * max_split_size_mb:512", NULL or "" for the defaults) into *o, starting
 * from the defaults. 0, or -1 with *cause one sentence naming the option:
 * PyTorch's own refusals (max_split_size_mb not over 20, divisions not a
 * power of two, a threshold outside (0, 1), ...), and backend:cudaMallocAsync
 * (another allocator, not modelled). Numbers must be whole decimal
 * integers (PyTorch's stoi would take "512abc" as 512; the replay does not
 * guess). */
int cuda_alloc_parse_conf(const char *conf, struct cuda_alloc_opts *o, char **cause);

struct cuda_alloc;

/* A fresh allocator for a device of device_bytes (what cudaMalloc can
 * hand out in all: the GPU's memory less what the CUDA context and the
 * rest hold; 0 = unlimited, then no request ever fails). NULL with *cause
 * when opts are inconsistent (a memory fraction outside (0, 1], or one
 * without a device size). */
struct cuda_alloc *cuda_alloc_create(const struct cuda_alloc_opts *opts, uint64_t device_bytes,
				     char **cause);
void cuda_alloc_destroy(struct cuda_alloc *a);

#define CUDA_ALLOC_OOM 1
/* torch's allocate(bytes) under the caller's id. 0, or CUDA_ALLOC_OOM when
 * the allocator would raise OutOfMemoryError (after its release-and-retry;
 * the state is then what PyTorch's is after the raise: cached blocks may
 * have been released), or -1 with *cause when the id is already live or
 * the size is over PyTorch's limit (one exabyte). bytes = 0 takes no
 * block (allocate(0) never calls malloc), but the id is live until freed. */
int cuda_alloc_alloc(struct cuda_alloc *a, uint64_t id, uint64_t bytes, char **cause);
/* Free the allocation id: 0, or -1 with *cause when id is not live. */
int cuda_alloc_free(struct cuda_alloc *a, uint64_t id, char **cause);
/* torch.cuda.empty_cache(): every cached block that is a whole segment
 * goes back to the driver (release_cached_blocks). */
void cuda_alloc_empty_cache(struct cuda_alloc *a);

/* The size of the block id holds (its request rounded, or the whole block
 * when the remainder was not split off); 0 when id is not live or took
 * no block. */
uint64_t cuda_alloc_block_size(const struct cuda_alloc *a, uint64_t id);

/* Bytes are torch.cuda.memory_stats()'s "all" figures where one exists
 * (named in brackets). */
struct cuda_alloc_stats {
	uint64_t allocated, allocated_peak;      /* [allocated_bytes.all.current/peak] */
	uint64_t reserved, reserved_peak;        /* [reserved_bytes.all.current/peak] */
	/* reserved - allocated at the end of the first call that left
	 * reserved at its highest (the cache that is not in use when the
	 * GPU holds the most), and the reserved and allocated of that moment. */
	uint64_t frag_at_peak, peak_reserved_at, peak_allocated_at;
	uint64_t inactive_split_bytes, inactive_split; /* [inactive_split_bytes/inactive_split .all.current] */
	uint64_t segments, segments_peak;        /* cudaMalloc'd segments [segment.all.current/peak] */
	uint64_t expandable_segments;            /* live expandable segments (not in segment.*, as in PyTorch) */
	uint64_t device_allocs, device_frees;    /* [num_device_alloc/free]: cudaMalloc/cudaFree, and map/unmap under expandable segments */
	uint64_t alloc_retries, ooms;            /* [num_alloc_retries], [num_ooms] */
	uint64_t cached_blocks, cached_bytes;    /* free blocks in the pools (mapped) */
	uint64_t live;                           /* live allocation ids */
};
void cuda_alloc_stats(const struct cuda_alloc *a, struct cuda_alloc_stats *out);

/* A replay's figures, as measure and theory write them (util/schedule.h,
 * zs_alloc_json): the counters at its end, and the reserved bytes when the
 * allocated bytes first reached their peak. cuda_alloc_note, called after
 * each cuda_alloc_alloc, keeps them. Plain data (it travels in the
 * engine's per-rank records under MPI). */
struct cuda_alloc_run {
	struct cuda_alloc_stats st;
	uint64_t reserved_at_allocated_peak;
};
void cuda_alloc_note(const struct cuda_alloc *a, struct cuda_alloc_run *r);

#endif
