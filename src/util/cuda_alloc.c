/*
 * cuda_alloc — PyTorch's CUDA caching allocator replayed (cuda_alloc.h).
 *
 * Written from PyTorch v2.6.0 (pytorch-v2.6.0, Debian's
 * pytorch_2.6.0+dfsg.orig.tar.xz): "A.cpp NNN" is a line of
 * c10/cuda/CUDACachingAllocator.cpp, "C.cpp NNN" one of
 * c10/cuda/CUDAAllocatorConfig.cpp. The structure follows the source's so
 * that each function can be read beside the one it replays: the same
 * names, the same order of tests, the same statistics at the same places.
 *
 * Addresses: a block's ptr is a virtual address the replay hands out, each
 * new cudaMalloc'd segment or expandable segment above every earlier one
 * (never reused). PyTorch orders free blocks of one size by address
 * (BlockComparatorSize, A.cpp 723-731), so the address decides only which
 * of two free blocks of the same size a request takes; the driver's real
 * addresses are not known without a GPU, and growing addresses is what a
 * fresh process's cudaMalloc usually returns.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cuda_alloc.h"
#include "util/util.h"

/* A.cpp 51-52, 121-128: the allocator's constants. */
#define K_LARGE_BUFFER ((uint64_t)20971520)   /* "large" allocations may be packed in 20 MiB blocks */
#define K_MIN_BLOCK_SIZE ((uint64_t)512)      /* all sizes are rounded to at least 512 bytes */
#define K_SMALL_SIZE ((uint64_t)1048576)      /* largest "small" allocation is 1 MiB */
#define K_SMALL_BUFFER ((uint64_t)2097152)    /* "small" allocations are packed in 2 MiB blocks */
#define K_MIN_LARGE_ALLOC ((uint64_t)10485760) /* allocations between 1 and 10 MiB may use kLargeBuffer */
#define K_ROUND_LARGE ((uint64_t)2097152)     /* round up large allocations to 2 MiB */
/* A.cpp 3622-3626: allocate() refuses a request of one exabyte or more. */
#define K_ONE_EXA_BYTES ((uint64_t)1152921504606846976ULL)
/* The address space of an expandable segment is 1 1/8 of the GPU's memory
 * (A.cpp 376, 2278). With no device size there is no GPU memory to take it
 * from: 2^48 B (the 256 TiB of address space Note [Expandable Segments]
 * mentions) stands for it, so that one segment a pool holds any trace. */
#define UNLIMITED_GLOBAL_MEM ((uint64_t)1 << 48)

struct ca_pool;
struct ca_es;

struct ca_block { /* struct Block, A.cpp 200-245 */
	uint64_t ptr, size;
	struct ca_block *prev, *next; /* neighbours in the segment, when split */
	struct ca_pool *pool;
	struct ca_es *es;        /* expandable_segment_, NULL for a cudaMalloc'd one */
	int allocated, mapped;
	int64_t gc_count_base;
	uint64_t id;             /* the caller's id while allocated */
};

/* A sorted set of blocks: by (size, ptr) for the free blocks of a pool
 * (BlockComparatorSize, A.cpp 723-731), by ptr for the unmapped parts of
 * expandable segments (BlockComparatorAddress, A.cpp 732-737). One stream,
 * so the stream key that both compare first is always equal. */
struct ca_set {
	struct ca_block **v;
	size_t n, cap;
	int by_address;
};

struct ca_pool { /* struct BlockPool, A.cpp 156-176 */
	struct ca_set blocks, unmapped;
	int is_small;
	int64_t get_free_blocks_call_count;
};

/* struct ExpandableSegment, A.cpp 358-640, what of it decides bytes: its
 * address range and page size. Which pages are mapped (its handles_) is
 * what the segment's blocks say (Block::mapped). */
struct ca_es {
	uint64_t base, segment_size, max_handles;
};

struct ca_entry { /* a live id */
	uint64_t id;
	struct ca_block *block; /* NULL for a zero-byte allocation */
	int used;
};

struct cuda_alloc {
	struct cuda_alloc_opts o;
	uint64_t device_bytes, global_mem;
	struct ca_pool small, large;   /* small_blocks, large_blocks */
	uint64_t total_allocated_memory; /* A.cpp 1068 */
	uint64_t allowed_memory_maximum; /* A.cpp 1070, set by setMemoryFraction 1596-1603 */
	int set_fraction;
	uint64_t next_addr;
	struct ca_es **es;             /* expandable_segments_ */
	size_t nes, caps;
	struct ca_entry *tab;          /* live ids: open addressing */
	size_t tabcap, tabn;
	struct cuda_alloc_stats st;
	uint64_t best_end_reserved;
};

/* ------------------------------------------------------------------------ */
/* The sorted sets */

static int set_less(const struct ca_set *s, const struct ca_block *a, uint64_t size, uint64_t ptr)
{
	if (!s->by_address && a->size != size)
		return a->size < size;
	return a->ptr < ptr;
}

/* std::set::lower_bound: the first element not less than the key. */
static size_t set_lower_bound(const struct ca_set *s, uint64_t size, uint64_t ptr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set_less(s, s->v[mid], size, ptr))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void set_insert(struct ca_set *s, struct ca_block *b)
{
	size_t i = set_lower_bound(s, b->size, b->ptr);

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = zs_realloc(s->v, s->cap * sizeof(struct ca_block *));
	}
	memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof(struct ca_block *));
	s->v[i] = b;
	s->n++;
}

static void set_erase_at(struct ca_set *s, size_t i)
{
	memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof(struct ca_block *));
	s->n--;
}

/* Erase b if present (std::set::erase by key); 1 when it was there. */
static int set_erase(struct ca_set *s, const struct ca_block *b)
{
	size_t i = set_lower_bound(s, b->size, b->ptr);

	if (i < s->n && s->v[i] == b) {
		set_erase_at(s, i);
		return 1;
	}
	return 0;
}

/* BlockPool::insert_into_blocks, A.cpp 250-254: the gc age starts now. */
static void insert_into_blocks(struct ca_pool *pool, struct ca_block *b)
{
	b->gc_count_base = pool->get_free_blocks_call_count;
	set_insert(&pool->blocks, b);
}

/* ------------------------------------------------------------------------ */
/* Live ids: an open-addressing table with linear probing */

static size_t id_hash(uint64_t x)
{
	x ^= x >> 33; /* splitmix64's finaliser */
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (size_t)x;
}

static struct ca_entry *id_find(const struct cuda_alloc *a, uint64_t id)
{
	if (a->tabcap == 0)
		return NULL;
	for (size_t i = id_hash(id) & (a->tabcap - 1);; i = (i + 1) & (a->tabcap - 1)) {
		if (!a->tab[i].used)
			return NULL;
		if (a->tab[i].id == id)
			return &a->tab[i];
	}
}

static void id_put(struct cuda_alloc *a, uint64_t id, struct ca_block *b);

static void id_grow(struct cuda_alloc *a)
{
	struct ca_entry *old = a->tab;
	size_t oldcap = a->tabcap;

	a->tabcap = oldcap ? 2 * oldcap : 64;
	a->tab = zs_calloc(a->tabcap, sizeof(*a->tab));
	a->tabn = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].used)
			id_put(a, old[i].id, old[i].block);
	free(old);
}

static void id_put(struct cuda_alloc *a, uint64_t id, struct ca_block *b)
{
	if (2 * (a->tabn + 1) > a->tabcap)
		id_grow(a);
	size_t i = id_hash(id) & (a->tabcap - 1);

	while (a->tab[i].used)
		i = (i + 1) & (a->tabcap - 1);
	a->tab[i].used = 1;
	a->tab[i].id = id;
	a->tab[i].block = b;
	a->tabn++;
}

/* Remove e, shifting later entries of its probe run back (no tombstones). */
static void id_remove(struct cuda_alloc *a, struct ca_entry *e)
{
	size_t mask = a->tabcap - 1, i = (size_t)(e - a->tab), j = i;

	a->tab[i].used = 0;
	a->tabn--;
	for (;;) {
		j = (j + 1) & mask;
		if (!a->tab[j].used)
			return;
		size_t home = id_hash(a->tab[j].id) & mask;
		/* j's entry may move to the hole at i when its home is not in
		 * the cyclic range (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			a->tab[i] = a->tab[j];
			a->tab[j].used = 0;
			i = j;
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Statistics (increase_stat / decrease_stat, A.cpp 139-151): the "all"
 * figures; the small and large pool ones are not kept. */

static void reserved_up(struct cuda_alloc *a, uint64_t n)
{
	a->st.reserved += n;
	if (a->st.reserved > a->st.reserved_peak)
		a->st.reserved_peak = a->st.reserved;
}

static void allocated_up(struct cuda_alloc *a, uint64_t n)
{
	a->st.allocated += n;
	if (a->st.allocated > a->st.allocated_peak)
		a->st.allocated_peak = a->st.allocated;
}

static int is_split(const struct ca_block *b)
{
	return b->prev != NULL || b->next != NULL;
}

static struct ca_block *block_new(struct ca_pool *pool, uint64_t size, uint64_t ptr)
{
	struct ca_block *b = zs_calloc(1, sizeof(*b));

	b->pool = pool;
	b->size = size;
	b->ptr = ptr;
	b->mapped = 1;
	return b;
}

/* Block::splice, A.cpp 231-242. */
static void splice(struct ca_block *b, struct ca_block *before, struct ca_block *after)
{
	if (before != NULL)
		before->next = b;
	b->prev = before;
	if (after != NULL)
		after->prev = b;
	b->next = after;
}

/* ------------------------------------------------------------------------ */
/* Sizes */

static uint64_t floor_log2(uint64_t x)
{
	return 63 - (uint64_t)__builtin_clzll(x);
}

/* CUDAAllocatorConfig::roundup_power2_divisions, C.cpp 26-43: the
 * interval of size among the powers of two from 1 MiB (index 0, which
 * also holds everything smaller) to 64 GiB (15, which also holds
 * everything larger). */
static uint64_t roundup_divisions_for(const struct cuda_alloc *a, uint64_t size)
{
	int64_t index = (int64_t)floor_log2(size) - 20;

	if (index < 0)
		index = 0;
	if (index > CUDA_ALLOC_DIV_INTERVALS - 1)
		index = CUDA_ALLOC_DIV_INTERVALS - 1;
	return a->o.roundup_divisions[index];
}

/* roundup_power2_next_division, A.cpp 2043-2061: the next of `divisions`
 * equal steps between the powers of two around size (1200 with 4
 * divisions: 1024, 1280, 1536, 1792, so 1280). */
static uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions)
{
	if ((size & (size - 1)) == 0)
		return size;
	uint64_t power2_floor = (uint64_t)1 << floor_log2(size);
	uint64_t power2_division = power2_floor >> floor_log2(divisions);

	if (power2_division == 0)
		return power2_floor << 1;
	uint64_t round_size_floor = size & ~(power2_division - 1);

	return round_size_floor == size ? size : round_size_floor + power2_division;
}

/* round_size, A.cpp 2063-2074: up to a multiple of 512 B, or to the next
 * power-of-two division when roundup_power2_divisions gives this size's
 * interval more than one and the size is over 512 B times that many. */
static uint64_t round_size(const struct cuda_alloc *a, uint64_t size)
{
	if (size < K_MIN_BLOCK_SIZE)
		return K_MIN_BLOCK_SIZE;
	uint64_t divisions = roundup_divisions_for(a, size);

	if (divisions > 1 && size > K_MIN_BLOCK_SIZE * divisions)
		return roundup_power2_next_division(size, divisions);
	return K_MIN_BLOCK_SIZE * ((size + K_MIN_BLOCK_SIZE - 1) / K_MIN_BLOCK_SIZE);
}

/* get_pool, A.cpp 2507-2531 (no graph capture): 1 MiB and under from the
 * small pool. */
static struct ca_pool *get_pool(struct cuda_alloc *a, uint64_t size)
{
	return size <= K_SMALL_SIZE ? &a->small : &a->large;
}

/* get_allocation_size, A.cpp 2550-2558: what a new segment is for a
 * request of size: 2 MiB for the small pool, 20 MiB under 10 MiB, else
 * the request up to a multiple of 2 MiB. */
static uint64_t get_allocation_size(uint64_t size)
{
	if (size <= K_SMALL_SIZE)
		return K_SMALL_BUFFER;
	if (size < K_MIN_LARGE_ALLOC)
		return K_LARGE_BUFFER;
	return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) / K_ROUND_LARGE);
}

/* should_split, A.cpp 2540-2548: a block of the small pool, or any under
 * expandable segments, is split when at least 512 B remain; one of the
 * large pool when the request is below max_split_size and more than
 * 1 MiB (kSmallSize) remains. */
static int should_split(const struct cuda_alloc *a, const struct ca_block *b, uint64_t size)
{
	uint64_t remaining = b->size - size;

	if (b->pool->is_small || a->o.expandable_segments)
		return remaining >= K_MIN_BLOCK_SIZE;
	return size < a->o.max_split_size && remaining > K_SMALL_SIZE;
}

/* ------------------------------------------------------------------------ */
/* Expandable segments: pages of 2 MiB (small pool) or 20 MiB (large) mapped
 * into one reserved address range (Note [Expandable Segments], A.cpp
 * 279-356). */

static uint64_t es_size(const struct ca_es *es) /* A.cpp 529-531 */
{
	return es->max_handles * es->segment_size;
}

/* numSegments, segmentLeft, segmentRight: A.cpp 614-624. */
static uint64_t es_num_segments(const struct ca_es *es, uint64_t size)
{
	return (size + es->segment_size - 1) / es->segment_size;
}

static uint64_t es_segment_left(const struct ca_es *es, uint64_t p)
{
	return (p - es->base) / es->segment_size;
}

static uint64_t es_segment_right(const struct ca_es *es, uint64_t p)
{
	return es_num_segments(es, p - es->base);
}

/* ExpandableSegment::map, A.cpp 389-429: a physical page (cuMemCreate) for
 * each unmapped page of the range, all or none: when one does not fit on
 * the device, those made so far are released and nothing is mapped. The
 * mapped length in *len (0 on failure). */
static uint64_t es_map(struct cuda_alloc *a, struct ca_es *es, uint64_t ptr, uint64_t size)
{
	uint64_t begin = es_segment_left(es, ptr), end = es_segment_right(es, ptr + size);

	if (begin == end)
		return 0;
	uint64_t bytes = (end - begin) * es->segment_size;

	if (a->device_bytes != 0 && (a->total_allocated_memory > a->device_bytes ||
				     bytes > a->device_bytes - a->total_allocated_memory))
		return 0;
	return bytes;
}

/* ExpandableSegment::unmap, A.cpp 431-438: only the whole pages inside the
 * range are released. Returns their first byte in *start and their length. */
static uint64_t es_unmap(struct ca_es *es, uint64_t ptr, uint64_t size, uint64_t *start)
{
	uint64_t begin = es_segment_right(es, ptr), end = es_segment_left(es, ptr + size);

	*start = es->base + begin * es->segment_size;
	if (begin >= end)
		return 0;
	return (end - begin) * es->segment_size;
}

static size_t try_merge_blocks(struct ca_block *dst, struct ca_block *src, struct ca_pool *pool);

/* find_expandable_block, A.cpp 2239-2293: the lowest unmapped range of the
 * pool that, with a free block before it, has room for size; else a new
 * segment whose address space is 1 1/8 of the device. */
static int allocatable(const struct ca_block *b)
{
	return b != NULL && !b->allocated;
}

static int has_available_address_space(const struct ca_block *b, uint64_t size)
{
	uint64_t bytes = 0;

	while (bytes < size && allocatable(b)) {
		bytes += b->size;
		b = b->next;
	}
	return bytes >= size;
}

static struct ca_block *find_expandable_block(struct cuda_alloc *a, struct ca_pool *pool, uint64_t size)
{
	for (size_t i = 0; i < pool->unmapped.n; i++) {
		struct ca_block *c = pool->unmapped.v[i];

		if (allocatable(c->prev))
			c = c->prev;
		if (has_available_address_space(c, size))
			return c;
	}
	struct ca_es *es = zs_calloc(1, sizeof(*es));

	es->segment_size = pool->is_small ? K_SMALL_BUFFER : K_LARGE_BUFFER;
	/* A.cpp 376: max_handles_ from the GPU's memory plus an eighth. */
	es->max_handles = es_num_segments(es, a->global_mem + a->global_mem / 8);
	es->base = a->next_addr;
	a->next_addr += es_size(es);
	if (a->nes == a->caps) {
		a->caps = a->caps ? 2 * a->caps : 4;
		a->es = zs_realloc(a->es, a->caps * sizeof(struct ca_es *));
	}
	a->es[a->nes++] = es;
	a->st.expandable_segments++;

	struct ca_block *candidate = block_new(pool, es_size(es), es->base);

	candidate->mapped = 0;
	candidate->es = es;
	set_insert(&pool->unmapped, candidate);
	return candidate;
}

/* map_block, A.cpp 2295-2361. */
static int map_block(struct cuda_alloc *a, struct ca_block *to_map, uint64_t size)
{
	uint64_t mapped = es_map(a, to_map->es, to_map->ptr, size);

	if (mapped == 0)
		return 0;
	struct ca_pool *pool = to_map->pool;

	set_erase(&pool->unmapped, to_map);
	to_map->mapped = 1;
	if (mapped < to_map->size) {
		struct ca_block *remaining = block_new(pool, to_map->size - mapped, to_map->ptr + mapped);

		remaining->mapped = 0;
		remaining->es = to_map->es;
		splice(remaining, to_map, to_map->next);
		set_insert(&pool->unmapped, remaining);
		to_map->size = mapped;
	}
	try_merge_blocks(to_map, to_map->prev, pool);
	try_merge_blocks(to_map, to_map->next, pool);
	insert_into_blocks(pool, to_map);
	a->total_allocated_memory += mapped;
	reserved_up(a, mapped);
	a->st.device_allocs++; /* A.cpp 2348 */
	return 1;
}

/* try_allocate_expandable_block, A.cpp 2363-2394: map pages at the
 * candidate until a free block of size is there. */
static struct ca_block *try_allocate_expandable_block(struct cuda_alloc *a, struct ca_pool *pool, uint64_t size)
{
	struct ca_block *candidate = find_expandable_block(a, pool, size);

	if (!candidate->mapped &&
	    !map_block(a, candidate, candidate->size < size ? candidate->size : size))
		return NULL;
	while (candidate->size < size) {
		uint64_t remaining = size - candidate->size;
		struct ca_block *new_candidate = candidate->next;

		if (!map_block(a, new_candidate, remaining < new_candidate->size ? remaining : new_candidate->size))
			return NULL;
		candidate = new_candidate;
	}
	set_erase(&pool->blocks, candidate);
	return candidate;
}

/* unmap_block, A.cpp 2974-3043: the whole pages of a free block go back;
 * the parts of pages before and after stay as free mapped blocks. */
static void unmap_block(struct cuda_alloc *a, struct ca_block *block)
{
	uint64_t start;
	uint64_t len = es_unmap(block->es, block->ptr, block->size, &start);

	if (len == 0)
		return;
	struct ca_pool *pool = block->pool;

	set_erase(&pool->blocks, block);
	uint64_t before_size = start - block->ptr;

	if (before_size > 0) {
		struct ca_block *before_free = block_new(pool, before_size, block->ptr);

		before_free->es = block->es;
		splice(before_free, block->prev, block);
		insert_into_blocks(pool, before_free);
	}
	uint64_t after_size = block->size - (before_size + len);

	if (after_size > 0) {
		struct ca_block *after_free = block_new(pool, after_size, start + len);

		after_free->es = block->es;
		splice(after_free, block, block->next);
		insert_into_blocks(pool, after_free);
	}
	block->ptr = start;
	block->size = len;
	block->mapped = 0;
	try_merge_blocks(block, block->prev, pool);
	try_merge_blocks(block, block->next, pool);
	set_insert(&pool->unmapped, block);
	a->total_allocated_memory -= len;
	a->st.reserved -= len;
	a->st.device_frees++;
}

/* release_expandable_segment, A.cpp 2907-2921: a segment wholly unmapped
 * gives its address space back. */
static void release_expandable_segment(struct cuda_alloc *a, struct ca_block *block)
{
	struct ca_es *es = block->es;

	for (size_t i = 0; i < a->nes; i++)
		if (a->es[i] == es) {
			memmove(a->es + i, a->es + i + 1, (a->nes - i - 1) * sizeof(struct ca_es *));
			a->nes--;
			break;
		}
	set_erase(&block->pool->unmapped, block);
	free(es);
	free(block);
	a->st.expandable_segments--;
}

/* ------------------------------------------------------------------------ */
/* Merging, releasing */

/* try_merge_blocks, A.cpp 2474-2505: src joins dst when it is free and
 * mapped alike; the size it brought, or 0. */
static size_t try_merge_blocks(struct ca_block *dst, struct ca_block *src, struct ca_pool *pool)
{
	if (src == NULL || src->allocated || dst->mapped != src->mapped)
		return 0;
	if (dst->prev == src) { /* [src dst] */
		dst->ptr = src->ptr;
		dst->prev = src->prev;
		if (dst->prev != NULL)
			dst->prev->next = dst;
	} else { /* [dst src] */
		dst->next = src->next;
		if (dst->next != NULL)
			dst->next->prev = dst;
	}
	/* Erase src under its own key before dst's size changes nothing of it. */
	if (src->mapped)
		set_erase(&pool->blocks, src);
	else
		set_erase(&pool->unmapped, src);
	size_t subsumed = (size_t)src->size;

	dst->size += src->size;
	free(src);
	return subsumed;
}

/* free_block, A.cpp 2397-2470: merge with the free neighbours of the
 * segment, back into the pool; inactive_split counts free blocks that are
 * parts of a segment (not under expandable segments, A.cpp 2446-2451). */
static void free_block(struct cuda_alloc *a, struct ca_block *block)
{
	struct ca_pool *pool = block->pool;
	int64_t net_blocks = 0, net_size = 0;
	struct ca_block *cands[2] = { block->prev, block->next };

	for (int k = 0; k < 2; k++) {
		size_t subsumed = try_merge_blocks(block, cands[k], pool);

		if (subsumed > 0) {
			net_blocks -= 1;
			net_size -= (int64_t)subsumed;
		}
	}
	insert_into_blocks(pool, block);
	if (is_split(block)) {
		net_blocks += 1;
		net_size += (int64_t)block->size;
	}
	if (block->es == NULL) {
		a->st.inactive_split = (uint64_t)((int64_t)a->st.inactive_split + net_blocks);
		a->st.inactive_split_bytes = (uint64_t)((int64_t)a->st.inactive_split_bytes + net_size);
	}
}

/* release_block, A.cpp 2923-2972: cudaFree a whole cached segment, the
 * i-th free block of its pool; its size. */
static uint64_t release_block(struct cuda_alloc *a, struct ca_pool *pool, size_t i)
{
	struct ca_block *block = pool->blocks.v[i];
	uint64_t size = block->size;

	if (is_split(block) || block->es != NULL) {
		/* The source asserts !expandable_segment_ (A.cpp 2926) and frees
		 * block->ptr as a whole segment; every caller passes a segment. */
		fprintf(stderr, "zerosim: cuda_alloc: release of a block that is not a whole segment (internal error)\n");
		abort();
	}
	a->st.device_frees++;
	a->total_allocated_memory -= size;
	a->st.segments--;
	a->st.reserved -= size;
	set_erase_at(&pool->blocks, i);
	free(block);
	return size;
}

/* release_blocks, A.cpp 3045-3068: every free block that is a whole
 * segment; under expandable segments the whole pages of every free block,
 * and the segment itself once nothing of it is mapped. */
static void release_blocks(struct cuda_alloc *a, struct ca_pool *pool)
{
	struct ca_block **to_unmap = NULL;
	size_t nun = 0;

	for (size_t i = 0; i < pool->blocks.n;) {
		struct ca_block *b = pool->blocks.v[i];

		if (b->es != NULL) {
			to_unmap = zs_realloc(to_unmap, (nun + 1) * sizeof(struct ca_block *));
			to_unmap[nun++] = b;
			i++;
		} else if (b->prev == NULL && b->next == NULL) {
			release_block(a, pool, i); /* erases v[i]: the next is at i */
		} else {
			i++;
		}
	}
	for (size_t k = 0; k < nun; k++) {
		struct ca_block *b = to_unmap[k];

		unmap_block(a, b);
		if (b->prev == NULL && b->next == NULL)
			release_expandable_segment(a, b);
	}
	free(to_unmap);
}

/* release_cached_blocks, A.cpp 2859-2905: with no memory pool active (none
 * is, here) and no events outstanding (one stream), the large pool's then
 * the small pool's whole cached segments. */
static int release_cached_blocks(struct cuda_alloc *a)
{
	release_blocks(a, &a->large);
	release_blocks(a, &a->small);
	return 1;
}

/* release_available_cached_blocks, A.cpp 2811-2857: only with
 * max_split_size_mb set. The smallest cached block of at least the request
 * (and at least max_split_size) is freed; when there is none, the largest
 * oversize blocks (>= max_split_size) down from the top until as much as
 * that key is freed. */
static int release_available_cached_blocks(struct cuda_alloc *a, struct ca_pool *pool, uint64_t size)
{
	if (a->o.max_split_size == UINT64_MAX)
		return 0;
	uint64_t key = size < a->o.max_split_size ? a->o.max_split_size : size;
	size_t it = set_lower_bound(&pool->blocks, key, 0);

	if (it == pool->blocks.n || pool->blocks.v[it]->es != NULL) {
		if (it == 0)
			return 0;
		uint64_t total_released = 0;

		--it;
		/* Walking down an array from which the current block is
		 * erased: the ones below keep their indices. (The source adds
		 * (*cur)->size after release_block deleted *cur, A.cpp 2844-2845;
		 * the size it meant is the block's, taken here before.) */
		while (total_released < key && pool->blocks.v[it]->size >= a->o.max_split_size) {
			size_t cur = it;
			int is_first = cur == 0;

			if (!is_first)
				--it;
			if (pool->blocks.v[cur]->es == NULL)
				total_released += release_block(a, pool, cur);
			if (is_first)
				break;
		}
		if (total_released < key)
			return 0;
	} else {
		release_block(a, pool, it);
	}
	return 1;
}

/* garbage_collect_cached_blocks, A.cpp 2629-2685: above the threshold's
 * share of the allowed memory, whole cached segments of the large pool that
 * have waited at least the mean age (in get_free_block calls) are freed,
 * again and again until enough is freed or none is left. */
static void garbage_collect_cached_blocks(struct cuda_alloc *a)
{
	struct ca_pool *pool = &a->large;
	uint64_t gc_threshold = (uint64_t)(a->o.gc_threshold * (double)a->allowed_memory_maximum);

	if (a->total_allocated_memory <= gc_threshold)
		return;
	uint64_t target_size = a->total_allocated_memory - gc_threshold, gc_reclaimed = 0, total_age = 0;
	int64_t freeable = 0;

	for (size_t i = 0; i < pool->blocks.n; i++)
		if (!is_split(pool->blocks.v[i])) {
			total_age += (uint64_t)(pool->get_free_blocks_call_count - pool->blocks.v[i]->gc_count_base);
			freeable++;
		}
	if (freeable == 0)
		return;
	int block_freed = 1;

	while (gc_reclaimed < target_size && block_freed && freeable > 0) {
		double age_threshold = (double)total_age / (double)freeable;

		block_freed = 0;
		for (size_t i = 0; i < pool->blocks.n;) {
			struct ca_block *b = pool->blocks.v[i];
			uint64_t age = (uint64_t)(pool->get_free_blocks_call_count - b->gc_count_base);

			if (!is_split(b) && b->es == NULL && (double)age >= age_threshold) {
				block_freed = 1;
				gc_reclaimed += b->size;
				total_age -= age;
				freeable--;
				release_block(a, pool, i);
			} else {
				i++;
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Finding and making blocks */

/* get_free_block, A.cpp 2560-2618: best fit, the smallest cached block of
 * at least size (the lowest address among equals); under expandable
 * segments a block whose unmapped tail lets it grow counts as that large;
 * an oversize block (>= max_split_size) only for a request of at least
 * max_split_size, and then only when it is less than
 * max_non_split_rounding_size larger. (The source's branch for blocks of
 * expandable segments with the option off needs the option switched at
 * run time, which a replay does not do.) */
static uint64_t expandable_size(const struct ca_block *b)
{
	return b->size + (b->next != NULL && !b->next->mapped ? b->next->size : 0);
}

static struct ca_block *get_free_block(struct cuda_alloc *a, struct ca_pool *pool, uint64_t size)
{
	if (a->set_fraction && a->o.gc_threshold > 0.0)
		++pool->get_free_blocks_call_count;
	size_t it = set_lower_bound(&pool->blocks, size, 0);

	if (it == pool->blocks.n)
		return NULL;
	if (pool->blocks.v[it]->es != NULL) {
		size_t next = it + 1;

		while (pool->blocks.v[it]->es != NULL && next < pool->blocks.n &&
		       expandable_size(pool->blocks.v[next]) < expandable_size(pool->blocks.v[it]))
			it = next++;
	}
	struct ca_block *b = pool->blocks.v[it];

	if (size < a->o.max_split_size && b->size >= a->o.max_split_size)
		return NULL;
	if (size >= a->o.max_split_size &&
	    (a->o.max_non_split_rounding_size > UINT64_MAX - size ||
	     b->size >= size + a->o.max_non_split_rounding_size))
		return NULL;
	set_erase_at(&pool->blocks, it);
	return b;
}

/* alloc_block, A.cpp 2693-2806: a new segment of alloc_size from cudaMalloc
 * (which fails when the device has less free), or under expandable
 * segments pages mapped for the request; never over the memory fraction. */
static struct ca_block *alloc_block(struct cuda_alloc *a, struct ca_pool *pool, uint64_t size,
				    uint64_t alloc_size, int is_retry)
{
	if (is_retry)
		a->st.alloc_retries++;
	if (a->set_fraction && (a->total_allocated_memory > a->allowed_memory_maximum ||
				alloc_size > a->allowed_memory_maximum - a->total_allocated_memory))
		return NULL;
	if (a->o.expandable_segments)
		return try_allocate_expandable_block(a, pool, size); /* A.cpp 2717-2731: the request's size */
	if (a->device_bytes != 0 && (a->total_allocated_memory > a->device_bytes ||
				     alloc_size > a->device_bytes - a->total_allocated_memory))
		return NULL; /* cudaErrorMemoryAllocation, A.cpp 2759-2773 */
	a->total_allocated_memory += alloc_size;
	struct ca_block *b = block_new(pool, alloc_size, a->next_addr);

	a->next_addr += alloc_size;
	a->st.segments++;
	if (a->st.segments > a->st.segments_peak)
		a->st.segments_peak = a->st.segments;
	reserved_up(a, alloc_size);
	a->st.device_allocs++; /* A.cpp 2796 */
	return b;
}

/* alloc_found_block, A.cpp 1371-1467: the front of the block is handed
 * out, the remainder (when split) goes back to the pool. */
static struct ca_block *alloc_found_block(struct cuda_alloc *a, struct ca_block *block, uint64_t size,
					  int split_remainder)
{
	struct ca_pool *pool = block->pool;
	int already_split = is_split(block);

	if (split_remainder) {
		struct ca_block *remaining = block;

		block = block_new(pool, size, remaining->ptr);
		block->es = remaining->es;
		block->prev = remaining->prev;
		if (block->prev != NULL)
			block->prev->next = block;
		block->next = remaining;
		remaining->prev = block;
		remaining->ptr += size;
		remaining->size -= size;
		insert_into_blocks(pool, remaining);
		if (already_split && block->es == NULL) {
			a->st.inactive_split_bytes -= block->size;
		} else if (block->es == NULL) {
			a->st.inactive_split_bytes += remaining->size;
			a->st.inactive_split += 1;
		}
	} else if (already_split && block->es == NULL) {
		a->st.inactive_split_bytes -= block->size;
		a->st.inactive_split -= 1;
	}
	block->allocated = 1;
	allocated_up(a, block->size); /* A.cpp 1445 */
	return block;
}

/* DeviceCachingAllocator::malloc, A.cpp 1185-1369. */
static struct ca_block *cuda_malloc(struct cuda_alloc *a, uint64_t orig_size)
{
	uint64_t size = round_size(a, orig_size);           /* A.cpp 1208 */
	struct ca_pool *pool = get_pool(a, size);           /* 1209 */
	uint64_t alloc_size = get_allocation_size(size);    /* 1210 */
	/* 1215-1219: the pool, then the free-memory callbacks (IPC's only,
	 * none here) and the pool again. */
	struct ca_block *block = get_free_block(a, pool, size);

	if (block == NULL) {
		/* 1224-1228: the garbage collector, only under a memory fraction. */
		if (a->set_fraction && a->o.gc_threshold > 0.0)
			garbage_collect_cached_blocks(a);
		/* 1234-1242: cudaMalloc; else free cached oversize blocks (only
		 * with max_split_size_mb) and try again; else free every cached
		 * whole segment and try a last time. */
		block = alloc_block(a, pool, size, alloc_size, 0);
		if (block == NULL && release_available_cached_blocks(a, pool, size))
			block = alloc_block(a, pool, size, alloc_size, 0);
		if (block == NULL && release_cached_blocks(a))
			block = alloc_block(a, pool, size, alloc_size, 1);
	}
	if (block == NULL) {
		a->st.ooms++; /* 1268, then OutOfMemoryError */
		return NULL;
	}
	return alloc_found_block(a, block, size, should_split(a, block, size)); /* 1366-1368 */
}

/* ------------------------------------------------------------------------ */
/* The interface */

void cuda_alloc_opts_default(struct cuda_alloc_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_split_size = UINT64_MAX;
	o->max_non_split_rounding_size = K_LARGE_BUFFER;
	o->cublas_workspace = CUDA_ALLOC_CUBLAS_WORKSPACE_SM90;
}

struct cuda_alloc *cuda_alloc_create(const struct cuda_alloc_opts *opts, uint64_t device_bytes, char **cause)
{
	if (opts->memory_fraction != 0.0) {
		if (!(opts->memory_fraction > 0.0 && opts->memory_fraction <= 1.0)) {
			zs_set_cause(cause, "a memory fraction must be in (0, 1], not %g", opts->memory_fraction);
			return NULL;
		}
		if (device_bytes == 0) {
			zs_set_cause(cause, "a memory fraction needs the device's memory size");
			return NULL;
		}
	}
	if (!(opts->gc_threshold >= 0.0 && opts->gc_threshold < 1.0)) {
		zs_set_cause(cause, "garbage_collection_threshold must be in (0, 1), not %g", opts->gc_threshold);
		return NULL;
	}
	struct cuda_alloc *a = zs_calloc(1, sizeof(*a));

	a->o = *opts;
	a->device_bytes = device_bytes;
	a->global_mem = device_bytes != 0 ? device_bytes : UNLIMITED_GLOBAL_MEM;
	a->small.is_small = 1;
	a->small.unmapped.by_address = 1;
	a->large.unmapped.by_address = 1;
	a->next_addr = K_LARGE_BUFFER; /* not 0: no block at the null address */
	if (opts->memory_fraction != 0.0) {
		/* setMemoryFraction, A.cpp 1596-1603. */
		a->allowed_memory_maximum = (uint64_t)(opts->memory_fraction * (double)device_bytes);
		a->set_fraction = 1;
	}
	return a;
}

static void pool_destroy(struct ca_pool *p)
{
	/* Every block is in exactly one of: blocks, unmapped, the id table. */
	for (size_t i = 0; i < p->blocks.n; i++)
		free(p->blocks.v[i]);
	for (size_t i = 0; i < p->unmapped.n; i++)
		free(p->unmapped.v[i]);
	free(p->blocks.v);
	free(p->unmapped.v);
}

void cuda_alloc_destroy(struct cuda_alloc *a)
{
	if (a == NULL)
		return;
	for (size_t i = 0; i < a->tabcap; i++)
		if (a->tab[i].used)
			free(a->tab[i].block);
	free(a->tab);
	pool_destroy(&a->small);
	pool_destroy(&a->large);
	for (size_t i = 0; i < a->nes; i++) {
		free(a->es[i]);
	}
	free(a->es);
	free(a);
}

static void note_call_end(struct cuda_alloc *a)
{
	if (a->st.reserved > a->best_end_reserved) {
		a->best_end_reserved = a->st.reserved;
		a->st.peak_reserved_at = a->st.reserved;
		a->st.peak_allocated_at = a->st.allocated;
		a->st.frag_at_peak = a->st.reserved - a->st.allocated;
	}
}

int cuda_alloc_alloc(struct cuda_alloc *a, uint64_t id, uint64_t bytes, char **cause)
{
	if (id_find(a, id) != NULL)
		return zs_fail(cause, "allocation %llu is already live", (unsigned long long)id);
	if (bytes >= K_ONE_EXA_BYTES)
		return zs_fail(cause, "allocation %llu of %llu bytes is over PyTorch's limit of one exabyte",
			       (unsigned long long)id, (unsigned long long)bytes);
	struct ca_block *b = NULL;

	if (bytes != 0) { /* A.cpp 3637: allocate(0) takes no block */
		b = cuda_malloc(a, bytes);
		note_call_end(a);
		if (b == NULL)
			return CUDA_ALLOC_OOM;
		b->id = id;
	}
	id_put(a, id, b);
	return 0;
}

int cuda_alloc_free(struct cuda_alloc *a, uint64_t id, char **cause)
{
	struct ca_entry *e = id_find(a, id);

	if (e == NULL)
		return zs_fail(cause, "allocation %llu is not live", (unsigned long long)id);
	struct ca_block *b = e->block;

	id_remove(a, e);
	if (b != NULL) {
		/* free, A.cpp 1469-1522 (no stream uses: free_block at once). */
		b->allocated = 0;
		a->st.allocated -= b->size;
		free_block(a, b);
	}
	return 0;
}

void cuda_alloc_empty_cache(struct cuda_alloc *a)
{
	release_cached_blocks(a); /* emptyCache, A.cpp 1606-1610 */
}

uint64_t cuda_alloc_block_size(const struct cuda_alloc *a, uint64_t id)
{
	const struct ca_entry *e = id_find(a, id);

	return e != NULL && e->block != NULL ? e->block->size : 0;
}

void cuda_alloc_stats(const struct cuda_alloc *a, struct cuda_alloc_stats *out)
{
	*out = a->st;
	out->cached_blocks = 0;
	out->cached_bytes = 0;
	const struct ca_pool *pools[2] = { &a->small, &a->large };

	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < pools[k]->blocks.n; i++) {
			out->cached_blocks++;
			out->cached_bytes += pools[k]->blocks.v[i]->size;
		}
	out->live = a->tabn;
}

void cuda_alloc_note(const struct cuda_alloc *a, struct cuda_alloc_run *r)
{
	/* A new allocated peak can only be reached by an allocation, so the
	 * reserved bytes after the one that reached it are those at the peak. */
	uint64_t before = r->st.allocated_peak;
	cuda_alloc_stats(a, &r->st);
	if (r->st.allocated_peak > before)
		r->reserved_at_allocated_peak = r->st.reserved;
}

/* ------------------------------------------------------------------------ */
/* PYTORCH_CUDA_ALLOC_CONF, as CUDAAllocatorConfig::parseArgs reads it
 * (C.cpp 260-353): tokens split at , : [ ] with spaces dropped (lexArgs,
 * C.cpp 45-65), "name:value" items separated by commas. */

struct lex {
	char **tok;
	size_t n;
};

static void lex_args(const char *env, struct lex *lx)
{
	size_t len = strlen(env);

	lx->tok = zs_calloc(len + 1, sizeof(*lx->tok)); /* never more tokens than characters */
	lx->n = 0;
	char *buf = zs_malloc(len + 1);
	size_t nb = 0;

	for (size_t i = 0; i < len; i++) {
		char c = env[i];

		if (c == ',' || c == ':' || c == '[' || c == ']') {
			if (nb > 0) {
				buf[nb] = '\0';
				lx->tok[lx->n++] = zs_strdup(buf);
				nb = 0;
			}
			char one[2] = { c, '\0' };

			lx->tok[lx->n++] = zs_strdup(one);
		} else if (c != ' ') {
			buf[nb++] = c;
		}
	}
	if (nb > 0) {
		buf[nb] = '\0';
		lx->tok[lx->n++] = zs_strdup(buf);
	}
	free(buf);
}

static void lex_free(struct lex *lx)
{
	for (size_t i = 0; i < lx->n; i++)
		free(lx->tok[i]);
	free(lx->tok);
}

static int tok_is(const struct lex *lx, size_t i, const char *s)
{
	return i < lx->n && strcmp(lx->tok[i], s) == 0;
}

/* A whole decimal integer, at most max. */
static int tok_uint(const struct lex *lx, size_t i, uint64_t max, uint64_t *out)
{
	if (i >= lx->n)
		return -1;
	const char *s = lx->tok[i];
	uint64_t v = 0;

	if (*s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		uint64_t d = (uint64_t)(*s - '0');

		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* parseMaxSplitSize and parseMaxNonSplitRoundingSize, C.cpp 78-118: MiB,
 * more than 20 (kLargeBuffer). */
static int parse_mb_over_20(const struct lex *lx, size_t *i, const char *name, uint64_t *out, char **cause)
{
	uint64_t v;

	if (tok_uint(lx, *i + 2, UINT64_MAX / CUDA_ALLOC_MIB, &v) != 0)
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: %s needs a whole number of MiB", name);
	if (v <= K_LARGE_BUFFER / CUDA_ALLOC_MIB)
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: %s too small, must be > %llu", name,
			       (unsigned long long)(K_LARGE_BUFFER / CUDA_ALLOC_MIB));
	*out = v * CUDA_ALLOC_MIB;
	*i += 2;
	return 0;
}

/* parseRoundUpPower2Divisions, C.cpp 138-217: one power of two for every
 * interval, or "[256:1,512:2,>:4]", a value from each interval's lower end
 * (in MiB, a power of two) on, the first also below it, ">" for the rest. */
static int parse_divisions(const struct lex *lx, size_t *ip, uint64_t *div, char **cause)
{
	size_t i = *ip + 2;
	uint64_t v;

	if (i >= lx->n)
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions needs a value");
	if (!tok_is(lx, i, "[")) {
		if (tok_uint(lx, i, UINT64_MAX, &v) != 0 || !is_pow2(v))
			return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions must be a power of 2");
		for (size_t k = 0; k < CUDA_ALLOC_DIV_INTERVALS; k++)
			div[k] = v;
		*ip = i;
		return 0;
	}
	int first_value = 1;
	size_t last_index = 0;

	while (++i < lx->n && !tok_is(lx, i, "]")) {
		size_t key = i;

		if (!tok_is(lx, ++i, ":") || tok_uint(lx, ++i, UINT64_MAX, &v) != 0)
			return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions: expected SIZE_MB:DIVISIONS");
		if (v != 0 && !is_pow2(v))
			return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions: the divisions must be a power of 2 or 0");
		if (tok_is(lx, key, ">")) {
			for (size_t k = last_index; k < CUDA_ALLOC_DIV_INTERVALS; k++)
				div[k] = v;
		} else {
			uint64_t mb;

			if (tok_uint(lx, key, UINT64_MAX, &mb) != 0 || !is_pow2(mb))
				return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions: the intervals must be powers of 2");
			size_t index = (size_t)floor_log2(mb);

			if (index > CUDA_ALLOC_DIV_INTERVALS - 1)
				index = CUDA_ALLOC_DIV_INTERVALS - 1;
			if (first_value) {
				for (size_t k = 0; k < index; k++)
					div[k] = v;
				first_value = 0;
			}
			div[index] = v;
			last_index = index;
		}
		if (i + 1 >= lx->n)
			return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions: missing ]");
		if (!tok_is(lx, i + 1, "]") && !tok_is(lx, ++i, ","))
			return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions: expected ,");
	}
	if (!tok_is(lx, i, "]"))
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions: missing ]");
	*ip = i;
	return 0;
}

/* garbage_collection_threshold, C.cpp 120-136: in (0, 1). */
static int parse_threshold(const struct lex *lx, size_t *i, double *out, char **cause)
{
	char *end;

	if (*i + 2 >= lx->n)
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: garbage_collection_threshold needs a value");
	const char *s = lx->tok[*i + 2];
	double v = strtod(s, &end);

	if (end == s || *end != '\0' || !isfinite(v))
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: garbage_collection_threshold needs a number, not \"%s\"", s);
	if (!(v > 0.0 && v < 1.0))
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: garbage_collection_threshold must be in (0, 1), not %s", s);
	*out = v;
	*i += 2;
	return 0;
}

static int parse_bool(const struct lex *lx, size_t *i, const char *name, int *out, char **cause)
{
	if (tok_is(lx, *i + 2, "True"))
		*out = 1;
	else if (tok_is(lx, *i + 2, "False"))
		*out = 0;
	else
		return zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: %s takes True or False", name);
	*i += 2;
	return 0;
}

static int known_option(const char *name)
{
	static const char *const names[] = {
		"max_split_size_mb", "max_non_split_rounding_mb", "garbage_collection_threshold",
		"roundup_power2_divisions", "expandable_segments", "backend", "release_lock_on_cudamalloc",
		"pinned_use_cuda_host_register", "pinned_use_background_threads", "pinned_num_register_threads",
	};

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (strcmp(name, names[k]) == 0)
			return 1;
	return 0;
}

int cuda_alloc_parse_conf(const char *conf, struct cuda_alloc_opts *o, char **cause)
{
	struct cuda_alloc_opts r;
	struct lex lx;
	int rc = 0;

	cuda_alloc_opts_default(&r);
	r.memory_fraction = o->memory_fraction; /* not PYTORCH_CUDA_ALLOC_CONF's */
	r.cublas_workspace = o->cublas_workspace; /* nor this */
	if (conf == NULL) {
		*o = r;
		return 0;
	}
	lex_args(conf, &lx);
	for (size_t i = 0; i < lx.n && rc == 0; i++) {
		const char *name = lx.tok[i];
		int ignored;

		if (!tok_is(&lx, i + 1, ":") && strcmp(name, ",") != 0 && strcmp(name, ":") != 0 &&
		    strcmp(name, "[") != 0 && strcmp(name, "]") != 0 && known_option(name)) {
			/* consumeToken, C.cpp 67-76 */
			rc = zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: expected %s:VALUE", name);
			break;
		}
		if (strcmp(name, "max_split_size_mb") == 0) {
			rc = parse_mb_over_20(&lx, &i, name, &r.max_split_size, cause);
		} else if (strcmp(name, "max_non_split_rounding_mb") == 0) {
			rc = parse_mb_over_20(&lx, &i, name, &r.max_non_split_rounding_size, cause);
		} else if (strcmp(name, "garbage_collection_threshold") == 0) {
			/* It acts only under set_per_process_memory_fraction
			 * (A.cpp 1224-1228, 2563-2568): opts.memory_fraction. */
			rc = parse_threshold(&lx, &i, &r.gc_threshold, cause);
		} else if (strcmp(name, "roundup_power2_divisions") == 0) {
			rc = parse_divisions(&lx, &i, r.roundup_divisions, cause);
		} else if (strcmp(name, "expandable_segments") == 0) {
			rc = parse_bool(&lx, &i, name, &r.expandable_segments, cause);
		} else if (strcmp(name, "backend") == 0) {
			if (tok_is(&lx, i + 2, "native"))
				i += 2;
			else if (tok_is(&lx, i + 2, "cudaMallocAsync"))
				rc = zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: backend:cudaMallocAsync is another allocator, not modelled");
			else
				rc = zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: backend is native or cudaMallocAsync");
		} else if (strcmp(name, "release_lock_on_cudamalloc") == 0 ||
			   strcmp(name, "pinned_use_cuda_host_register") == 0 ||
			   strcmp(name, "pinned_use_background_threads") == 0) {
			/* Locking and pinned host memory: no device byte changes. */
			rc = parse_bool(&lx, &i, name, &ignored, cause);
		} else if (strcmp(name, "pinned_num_register_threads") == 0) {
			uint64_t v;

			if (tok_uint(&lx, i + 2, UINT64_MAX, &v) != 0 || !is_pow2(v))
				rc = zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: pinned_num_register_threads must be a power of 2");
			i += 2;
		} else {
			rc = zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: unrecognized option \"%s\"", name);
		}
		/* C.cpp 343-345: a comma between items. */
		if (rc == 0 && i + 1 < lx.n && !tok_is(&lx, ++i, ","))
			rc = zs_fail(cause, "PYTORCH_CUDA_ALLOC_CONF: expected , after %s", name);
	}
	lex_free(&lx);
	if (rc == 0)
		*o = r;
	return rc;
}
