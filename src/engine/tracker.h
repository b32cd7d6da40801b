/*
 * tracker — every byte the engine uses is allocated here, tagged with the
 * rank that holds it and a category (docs/schedule.md). It keeps current
 * and peak bytes per rank and per category, and the breakdown at the moment
 * each rank first reached its peak: redis's zmalloc idea, made per rank.
 *
 * With recording on, it also logs rank 0's allocation events with the
 * current phase, for the timeline figure.
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

#include "util/schedule.h" /* enum zs_cat, enum zs_phase and their names */

enum zs_op { ZS_OP_START, ZS_OP_PHASE, ZS_OP_ALLOC, ZS_OP_FREE };

struct zs_event {
	enum zs_phase phase;
	enum zs_op op;
	enum zs_cat cat;
	size_t bytes;
	size_t current; /* rank 0's bytes after the event */
};

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
	struct zs_event *events;
	size_t nevents, capevents;
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

/* Start logging rank 0's events (clears any earlier log). */
void tracker_record(struct zs_tracker *t);
void tracker_stop_recording(struct zs_tracker *t);

/* Enter phase p; while recording, a change of phase is logged as an event
 * of its own (so that phases without allocations still show). */
void tracker_set_phase(struct zs_tracker *t, enum zs_phase p);

size_t tracker_outstanding(const struct zs_tracker *t);

#endif
