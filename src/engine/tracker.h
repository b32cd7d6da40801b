/*
 * tracker — every byte the engine uses is allocated here, tagged with the
 * rank that holds it and a category (docs/schedule.md). It keeps current
 * and peak bytes per rank and per category, and the breakdown at the moment
 * each rank first reached its peak: redis's zmalloc idea, made per rank.
 *
 * With recording on, it also logs rank 0's allocation events (or every
 * rank's, tracker_record_ranks) with the current phase, for the timeline
 * figure and for a replay elsewhere: every device block has an id (1, 2,
 * ... in its rank's allocation order, so the same in process and under
 * MPI), and a free names the id it frees.
 *
 * With tracker_allocator, every rank's device allocations and frees are
 * also fed, in order, to a model of PyTorch's CUDA caching allocator
 * (util/cuda_alloc.h), one per rank, from the first allocation of the run.
 *
 * Ownership: tracker_alloc returns uninitialised memory, as malloc does;
 * the engine writes every buffer before it reads it and zeroes the
 * optimizer state itself (valgrind's memcheck in `make valgrind` holds it
 * to that). The caller returns each block with tracker_free (same tracker,
 * same rank). tracker_destroy frees the tracker's own tables, not
 * outstanding blocks (it is an error to leave any; tracker_outstanding
 * tells).
 */
#ifndef ZS_TRACKER_H
#define ZS_TRACKER_H

#include <stddef.h>

#include <stdint.h>

#include "util/cuda_alloc.h"
#include "util/schedule.h" /* enum zs_cat, enum zs_phase and their names */

/* ZS_OP_WORKSPACE: the rank's allocator replay was given cuBLAS's
 * workspace (tracker_matmul), id CUDA_ALLOC_WORKSPACE_ID; not a tracked
 * block (current bytes unchanged). Logged where it is made, or just after
 * the start where it was made before the log began. */
enum zs_op { ZS_OP_START, ZS_OP_PHASE, ZS_OP_ALLOC, ZS_OP_FREE, ZS_OP_WORKSPACE };

struct zs_event {
	enum zs_phase phase;
	enum zs_op op;
	enum zs_cat cat;
	size_t bytes;
	size_t current; /* the logging rank's bytes after the event */
	uint64_t id;    /* the block allocated or freed (0 for start and phase) */
};

/* One rank's log: its events, and the blocks it held when the log began
 * (op alloc, in allocation order: what a replay allocates first). */
struct zs_evlog {
	struct zs_event *events;
	size_t nevents, capevents;
	struct zs_event *live;
	size_t nlive;
};

/* One rank's replay through the caching allocator (cuda_alloc.h). */
#define zs_alloc_rank cuda_alloc_run

/* A rank's device bytes (every block but tracker_alloc_host's), and apart
 * from them its host bytes (ZeRO-Offload's), each with its own peak. */
struct zs_rank_mem {
	size_t cur[ZS_NCATS];
	size_t total;
	size_t peak;
	size_t at_peak[ZS_NCATS]; /* breakdown when peak was first reached */
	size_t blocks;            /* outstanding allocations */
	size_t host_cur[ZS_NCATS], host_total, host_peak;
};

struct zs_tracker {
	unsigned nranks;
	struct zs_rank_mem *rank;
	enum zs_phase phase;
	int recording;
	unsigned nlogged;      /* ranks logged while recording: 1 (rank 0) or nranks */
	struct zs_evlog *log;  /* nlogged logs; log[0].events is rank 0's timeline */
	/* Per rank: the next device block's id, and with tracker_keep_ids
	 * its blocks by id - 1 (category and bytes; bytes of a freed one
	 * SIZE_MAX), for a timeline's live blocks. */
	struct zs_ids {
		uint64_t next;
		struct zs_blockrec { enum zs_cat cat; size_t bytes; } *byid;
		size_t cap;
	} *ids;
	int keep_ids;
	struct cuda_alloc **ca;    /* per rank, with tracker_allocator; else NULL */
	struct zs_alloc_rank *ca_rank;
	uint64_t workspace;        /* the cuBLAS workspace's bytes (the opts'), 0 for none */
	unsigned char *matmul_run; /* per rank, with tracker_allocator: its first matmul has run */
};

const char *tracker_op_name(enum zs_op o);

void tracker_init(struct zs_tracker *t, unsigned nranks);
void tracker_destroy(struct zs_tracker *t);

void *tracker_alloc(struct zs_tracker *t, unsigned rank, enum zs_cat cat, size_t bytes);

/* The same count for a block the step allocates at a fixed size and may
 * use only the start of (DeepSpeed's reduce bucket: 5e8 elements whatever
 * the model). It is mapped at its full size (anonymous, MAP_NORESERVE)
 * and counted at its full size, as a device allocator would; the pages the
 * step never writes are never faulted in, so eight ranks' 1 GB buckets
 * cost this machine only what they hold. The block ends at an
 * inaccessible guard page: a write past its last byte faults, where a
 * heap block's slack would hide it. Zero-filled (fresh pages); NULL
 * when the mapping fails (the caller reports it). Freed with tracker_free. */
void *tracker_alloc_mapped(struct zs_tracker *t, unsigned rank, enum zs_cat cat, size_t bytes);

/* A block in the rank's host memory (an offloaded buffer): counted in
 * host_cur, host_total and host_peak, never in the device counts; not in
 * the timeline, which is rank 0's device memory. Freed with tracker_free. */
void *tracker_alloc_host(struct zs_tracker *t, unsigned rank, enum zs_cat cat, size_t bytes);
void tracker_free(struct zs_tracker *t, unsigned rank, void *p);

/* Keep every block's record by id, so that tracker_record can list the
 * blocks live when it starts. Call before the first allocation. */
void tracker_keep_ids(struct zs_tracker *t);

/* Feed every rank's device allocations and frees to a cuda_alloc of its
 * own with opts (unlimited device memory). Call before the first
 * allocation; the replay's figures are in t->ca_rank[k] after tracker_sync. */
void tracker_allocator(struct zs_tracker *t, const struct cuda_alloc_opts *opts);
/* Rank's step is about to run a matmul (its output already allocated):
 * the first time, its allocator is asked for the cuBLAS workspace (opts'
 * cublas_workspace bytes, id CUDA_ALLOC_WORKSPACE_ID, never freed), as
 * PyTorch's first cuBLAS call asks its caching allocator. Only the replay
 * sees it: the rank's counts, peaks and timeline are the step's blocks
 * alone. Nothing without tracker_allocator. */
void tracker_matmul(struct zs_tracker *t, unsigned rank);
/* Bring t->ca_rank up to date with the allocators' current counters. */
void tracker_sync(struct zs_tracker *t);

/* Start logging rank 0's events (clears any earlier log); with ids kept,
 * the blocks live at this moment become log[0].live. */
void tracker_record(struct zs_tracker *t);
/* The same for every rank, each in its own log. */
void tracker_record_ranks(struct zs_tracker *t);
void tracker_stop_recording(struct zs_tracker *t);

/* Enter phase p; while recording, a change of phase is logged as an event
 * of its own (so that phases without allocations still show). */
void tracker_set_phase(struct zs_tracker *t, enum zs_phase p);
/* Enter phase p for rank's events alone, for steps that run the ranks one
 * after another between collectives (ag_exec's world): a change is logged
 * in rank's own log only, against the phase that log is in, so that one
 * rank's walk through a phase never shows in another rank's timeline. */
void tracker_set_rank_phase(struct zs_tracker *t, unsigned rank, enum zs_phase p);

size_t tracker_outstanding(const struct zs_tracker *t);

#endif
