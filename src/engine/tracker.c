/*
 * tracker — see tracker.h. Each block carries a small header with its size,
 * category and rank, so a free needs only the pointer (zmalloc's
 * PREFIX_SIZE). The header is bookkeeping and is not counted: the counts are
 * the bytes the training step asked for, as a framework's allocator reports.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/heap.h"
#include "engine/tracker.h"
#include "util/util.h"

struct header {
	uint64_t id; /* device blocks: 1, 2, ... in allocation order; host blocks 0 */
	size_t bytes;
	unsigned rank;
	enum zs_cat cat;
	int mapped; /* tracker_alloc_mapped's: munmap, not free */
	int host;   /* tracker_alloc_host's: counted as host memory */
};

/* A block this large may have grown the heap (heap.h). */
#define LARGE_BLOCK ((size_t)64 << 10)

/* Keep the payload aligned for any type. */
#define HEADER_SIZE ((sizeof(struct header) + 15) & ~(size_t)15)

static const char *const op_names[] = {"start", "phase", "alloc", "free", "workspace"};

const char *tracker_op_name(enum zs_op o) { return op_names[o]; }

void tracker_init(struct zs_tracker *t, unsigned nranks)
{
	memset(t, 0, sizeof *t);
	t->nranks = nranks;
	t->rank = zs_calloc(nranks, sizeof *t->rank);
	t->nlogged = 1;
	t->log = zs_calloc(nranks, sizeof *t->log);
	t->ids = zs_calloc(nranks, sizeof *t->ids);
	for (unsigned k = 0; k < nranks; k++)
		t->ids[k].next = 1;
}

void tracker_destroy(struct zs_tracker *t)
{
	for (unsigned k = 0; k < t->nranks; k++) {
		free(t->log[k].events);
		free(t->log[k].live);
		if (t->ca != NULL)
			cuda_alloc_destroy(t->ca[k]);
		free(t->ids[k].byid);
	}
	free(t->ids);
	free(t->log);
	free(t->ca);
	free(t->ca_rank);
	free(t->matmul_run);
	free(t->rank);
	memset(t, 0, sizeof *t);
}

void tracker_keep_ids(struct zs_tracker *t)
{
	t->keep_ids = 1;
}

void tracker_allocator(struct zs_tracker *t, const struct cuda_alloc_opts *opts)
{
	char *cause = NULL;
	t->ca = zs_calloc(t->nranks, sizeof *t->ca); /* NOLINT(bugprone-sizeof-expression): an array of pointers */
	t->ca_rank = zs_calloc(t->nranks, sizeof *t->ca_rank);
	t->matmul_run = zs_calloc(t->nranks, sizeof *t->matmul_run);
	t->workspace = opts->cublas_workspace;
	for (unsigned k = 0; k < t->nranks; k++) {
		t->ca[k] = cuda_alloc_create(opts, 0, &cause);
		if (t->ca[k] == NULL) { /* opts were parsed and checked by the caller */
			fprintf(stderr, "zerosim: internal error: %s\n", cause ? cause : "cuda_alloc_create");
			abort();
		}
	}
}

void tracker_sync(struct zs_tracker *t)
{
	for (unsigned k = 0; t->ca != NULL && k < t->nranks; k++)
		cuda_alloc_stats(t->ca[k], &t->ca_rank[k].st);
}

/* A replay that the allocator refuses is a bug here (ids are unique and
 * every free names a live one; no device size, so no OOM). */
static void replay_check(int rc, char *cause)
{
	if (rc != 0) {
		fprintf(stderr, "zerosim: internal error: allocator replay: %s\n", cause ? cause : "out of memory");
		abort();
	}
}

static void log_event(struct zs_tracker *t, unsigned rank, enum zs_op op, enum zs_cat cat, size_t bytes, uint64_t id)
{
	struct zs_evlog *l = &t->log[rank];
	if (l->nevents == l->capevents) {
		l->capevents = l->capevents ? 2 * l->capevents : 64;
		l->events = zs_realloc(l->events, l->capevents * sizeof *l->events);
	}
	l->events[l->nevents++] = (struct zs_event){t->phase, op, cat, bytes, t->rank[rank].total, id};
}

void tracker_matmul(struct zs_tracker *t, unsigned rank)
{
	if (t->ca == NULL || t->matmul_run[rank])
		return;
	t->matmul_run[rank] = 1;
	if (t->workspace == 0) /* CUBLAS_WORKSPACE_CONFIG=:0:0 asks for none */
		return;
	char *cause = NULL;
	replay_check(cuda_alloc_alloc(t->ca[rank], CUDA_ALLOC_WORKSPACE_ID, t->workspace, &cause), cause);
	cuda_alloc_note(t->ca[rank], &t->ca_rank[rank]);
	if (t->recording && rank < t->nlogged)
		log_event(t, rank, ZS_OP_WORKSPACE, ZS_CAT_SCRATCH, (size_t)t->workspace, CUDA_ALLOC_WORKSPACE_ID);
}

/* Count a block of rank's, at its header. */
static void *counted(struct zs_tracker *t, char *raw, unsigned rank, enum zs_cat cat, size_t bytes, int mapped)
{
	struct zs_ids *ids = &t->ids[rank];
	struct header h = {ids->next++, bytes, rank, cat, mapped, 0};
	memcpy(raw, &h, sizeof h);
	if (t->keep_ids) {
		if (h.id > ids->cap) {
			ids->cap = ids->cap ? 2 * ids->cap : 1024;
			ids->byid = zs_realloc(ids->byid, ids->cap * sizeof *ids->byid);
		}
		ids->byid[h.id - 1] = (struct zs_blockrec){cat, bytes};
	}
	if (t->ca != NULL) {
		char *cause = NULL;
		replay_check(cuda_alloc_alloc(t->ca[rank], h.id, bytes, &cause), cause);
		cuda_alloc_note(t->ca[rank], &t->ca_rank[rank]);
	}
	struct zs_rank_mem *m = &t->rank[rank];
	m->cur[cat] += bytes;
	m->total += bytes;
	m->blocks++;
	if (m->total > m->peak) {
		m->peak = m->total;
		memcpy(m->at_peak, m->cur, sizeof m->cur);
	}
	if (t->recording && rank < t->nlogged)
		log_event(t, rank, ZS_OP_ALLOC, cat, bytes, h.id);
	return raw + HEADER_SIZE;
}

void *tracker_alloc(struct zs_tracker *t, unsigned rank, enum zs_cat cat, size_t bytes)
{
	char *raw = zs_malloc(HEADER_SIZE + bytes);
	if (bytes >= LARGE_BLOCK)
		heap_grown(); /* before the block's pages are first touched */
	return counted(t, raw, rank, cat, bytes, 0);
}

void *tracker_alloc_host(struct zs_tracker *t, unsigned rank, enum zs_cat cat, size_t bytes)
{
	char *raw = zs_malloc(HEADER_SIZE + bytes);
	if (bytes >= LARGE_BLOCK)
		heap_grown();
	struct header h = {0, bytes, rank, cat, 0, 1};
	memcpy(raw, &h, sizeof h);
	struct zs_rank_mem *m = &t->rank[rank];
	m->host_cur[cat] += bytes;
	m->host_total += bytes;
	m->blocks++;
	if (m->host_total > m->host_peak)
		m->host_peak = m->host_total;
	return raw + HEADER_SIZE;
}

/* A mapped block's pages: header and payload rounded up to whole pages,
 * then one inaccessible guard page. The payload ends where the guard
 * begins, so a write one element past it faults (it starts at an address
 * aligned as `bytes` is, enough for bytes = n·sizeof(T)). */
static size_t mapped_span(size_t bytes, size_t page) { return (HEADER_SIZE + bytes + page - 1) / page * page; }

void *tracker_alloc_mapped(struct zs_tracker *t, unsigned rank, enum zs_cat cat, size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (bytes > SIZE_MAX / 2)
		return NULL;
	size_t span = mapped_span(bytes, page);
	/* Mapped writable, then the guard page closed: memcheck shadows a
	 * fresh mapping for nothing, but a whole mprotect'ed one page by page. */
	char *base = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	if (mprotect(base + span, page, PROT_NONE) != 0) {
		munmap(base, span + page);
		return NULL;
	}
	return counted(t, base + span - bytes - HEADER_SIZE, rank, cat, bytes, 1);
}

void tracker_free(struct zs_tracker *t, unsigned rank, void *p)
{
	if (p == NULL)
		return;
	char *raw = (char *)p - HEADER_SIZE;
	struct header h;
	memcpy(&h, raw, sizeof h);
	if (h.rank != rank) {
		fprintf(stderr, "zerosim: internal error: rank %u frees a block of rank %u\n", rank, h.rank);
		abort();
	}
	struct zs_rank_mem *m = &t->rank[rank];
	m->blocks--;
	if (h.host) {
		m->host_cur[h.cat] -= h.bytes;
		m->host_total -= h.bytes;
		free(raw);
		return;
	}
	m->cur[h.cat] -= h.bytes;
	m->total -= h.bytes;
	if (t->recording && rank < t->nlogged)
		log_event(t, rank, ZS_OP_FREE, h.cat, h.bytes, h.id);
	if (t->keep_ids)
		t->ids[rank].byid[h.id - 1].bytes = SIZE_MAX;
	if (t->ca != NULL) {
		char *cause = NULL;
		replay_check(cuda_alloc_free(t->ca[rank], h.id, &cause), cause);
	}
	if (h.mapped) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		munmap((char *)((uintptr_t)raw / page * page), mapped_span(h.bytes, page) + page);
	} else {
		free(raw);
	}
}

void tracker_set_phase(struct zs_tracker *t, enum zs_phase p)
{
	if (t->recording && p != t->phase) {
		t->phase = p;
		for (unsigned k = 0; k < t->nlogged; k++)
			log_event(t, k, ZS_OP_PHASE, ZS_CAT_PARAM16, 0, 0);
	}
	t->phase = p;
}

void tracker_set_rank_phase(struct zs_tracker *t, unsigned rank, enum zs_phase p)
{
	t->phase = p;
	if (t->recording && rank < t->nlogged) {
		const struct zs_evlog *l = &t->log[rank];
		if (l->nevents > 0 && l->events[l->nevents - 1].phase != p)
			log_event(t, rank, ZS_OP_PHASE, ZS_CAT_PARAM16, 0, 0);
	}
}

static void record_from(struct zs_tracker *t, unsigned nlogged)
{
	t->recording = 1;
	t->nlogged = nlogged;
	t->phase = ZS_PH_SETUP; /* the state the step starts from */
	for (unsigned k = 0; k < nlogged; k++) {
		struct zs_evlog *l = &t->log[k];
		l->nevents = 0;
		free(l->live);
		l->live = NULL;
		l->nlive = 0;
		log_event(t, k, ZS_OP_START, ZS_CAT_PARAM16, 0, 0);
		/* a replay of the log holds the workspace made before it */
		if (t->matmul_run != NULL && t->matmul_run[k] && t->workspace > 0)
			log_event(t, k, ZS_OP_WORKSPACE, ZS_CAT_SCRATCH, (size_t)t->workspace, CUDA_ALLOC_WORKSPACE_ID);
	}
	if (!t->keep_ids)
		return;
	/* The blocks each rank holds now, in allocation order. */
	for (unsigned k = 0; k < nlogged; k++) {
		const struct zs_ids *ids = &t->ids[k];
		struct zs_evlog *l = &t->log[k];
		for (uint64_t id = 1; id < ids->next; id++)
			l->nlive += ids->byid[id - 1].bytes != SIZE_MAX;
		l->live = zs_malloc((l->nlive ? l->nlive : 1) * sizeof *l->live);
		l->nlive = 0;
		for (uint64_t id = 1; id < ids->next; id++)
			if (ids->byid[id - 1].bytes != SIZE_MAX)
				l->live[l->nlive++] = (struct zs_event){ZS_PH_SETUP, ZS_OP_ALLOC, ids->byid[id - 1].cat,
				                                        ids->byid[id - 1].bytes, 0, id};
	}
}

void tracker_record(struct zs_tracker *t) { record_from(t, 1); }

void tracker_record_ranks(struct zs_tracker *t) { record_from(t, t->nranks); }

void tracker_stop_recording(struct zs_tracker *t) { t->recording = 0; }

size_t tracker_outstanding(const struct zs_tracker *t)
{
	size_t n = 0;
	for (unsigned r = 0; r < t->nranks; r++)
		n += t->rank[r].blocks;
	return n;
}
