/*
 * test_cuda_alloc — the replay of PyTorch's CUDA caching allocator
 * (src/util/cuda_alloc.c) against traces worked by hand from the rules of
 * c10/cuda/CUDACachingAllocator.cpp ("A.cpp") and CUDAAllocatorConfig.cpp
 * ("C.cpp") of PyTorch v2.6.0, one rule a test: the lines are cited where
 * each expected number is worked out, never taken from the replay. Then
 * what holds for every trace: allocated + cached = reserved, and a trace
 * freed in full and emptied gives every byte back.
 * Links libzsutil.a only.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/cuda_alloc.h"
#include "util/util.h"

#define KIB ((uint64_t)1024)
#define MIB ((uint64_t)1048576)

static struct cuda_alloc *make(const char *conf, uint64_t device_bytes)
{
	struct cuda_alloc_opts o;
	char *cause = NULL;

	cuda_alloc_opts_default(&o);
	ck_assert_msg(cuda_alloc_parse_conf(conf, &o, &cause) == 0, "%s", cause ? cause : "");
	struct cuda_alloc *a = cuda_alloc_create(&o, device_bytes, &cause);

	ck_assert_msg(a != NULL, "%s", cause ? cause : "");
	return a;
}

static void alloc_ok(struct cuda_alloc *a, uint64_t id, uint64_t bytes)
{
	char *cause = NULL;
	int rc = cuda_alloc_alloc(a, id, bytes, &cause);

	ck_assert_msg(rc == 0, "alloc %llu of %llu B: %d %s", (unsigned long long)id,
		      (unsigned long long)bytes, rc, cause ? cause : "");
}

static void free_ok(struct cuda_alloc *a, uint64_t id)
{
	char *cause = NULL;

	ck_assert_msg(cuda_alloc_free(a, id, &cause) == 0, "%s", cause ? cause : "");
}

static struct cuda_alloc_stats stats(const struct cuda_alloc *a)
{
	struct cuda_alloc_stats s;

	cuda_alloc_stats(a, &s);
	return s;
}

/* ------------------------------------------------------------------------ */

/* round_size (A.cpp 2063-2074): under 512 B -> 512, else up to a multiple
 * of 512. get_pool (2527-2530): <= 1 MiB from the small pool;
 * get_allocation_size (2551-2552): its segments are 2 MiB (kSmallBuffer,
 * 124). should_split (2542-2543): a small block splits when >= 512 B
 * remain. */
START_TEST(test_small_pool_packs_requests_into_2_mib_segments)
{
	struct cuda_alloc *a = make(NULL, 0);
	struct cuda_alloc_stats s;

	alloc_ok(a, 1, 1000); /* 1024; a new 2 MiB segment, 2097152 - 1024 = 2096128 left */
	ck_assert_uint_eq(cuda_alloc_block_size(a, 1), 1024);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 2 * MIB);
	ck_assert_uint_eq(s.segments, 1);
	ck_assert_uint_eq(s.inactive_split, 1);
	ck_assert_uint_eq(s.inactive_split_bytes, 2096128);

	alloc_ok(a, 2, 3000); /* 3072 from the 2096128 block: 2093056 left */
	alloc_ok(a, 3, 400);  /* 512: 2092544 left */
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 3072);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 3), 512);
	alloc_ok(a, 4, MIB);  /* 1048576 is small (<= kSmallSize): 1043968 left */
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 2 * MIB);
	ck_assert_uint_eq(s.segments, 1);
	ck_assert_uint_eq(s.device_allocs, 1);
	ck_assert_uint_eq(s.allocated, 1024 + 3072 + 512 + MIB);
	ck_assert_uint_eq(s.inactive_split_bytes, 1043968);

	alloc_ok(a, 5, MIB); /* 1043968 < 1 MiB: a second 2 MiB segment, 1 MiB left of it */
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 4 * MIB);
	ck_assert_uint_eq(s.segments, 2);
	ck_assert_uint_eq(s.device_allocs, 2);
	ck_assert_uint_eq(s.inactive_split, 2);
	ck_assert_uint_eq(s.inactive_split_bytes, 1043968 + MIB);
	ck_assert_uint_eq(s.frag_at_peak, 4 * MIB - (1024 + 3072 + 512 + 2 * MIB));
	cuda_alloc_destroy(a);
}
END_TEST

/* get_allocation_size (A.cpp 2553-2554): over 1 MiB and under 10 MiB
 * (kMinLargeAlloc, 126) a request makes a 20 MiB segment (kLargeBuffer,
 * 51); should_split (2545-2546): more than 1 MiB remains, so it splits;
 * get_free_block (2569) then packs the next medium request in it. */
START_TEST(test_medium_requests_share_20_mib_segments)
{
	struct cuda_alloc *a = make(NULL, 0);
	struct cuda_alloc_stats s;

	alloc_ok(a, 1, 5 * MIB);     /* 20 MiB segment, 15 MiB left */
	alloc_ok(a, 2, 5 * MIB + 1); /* 5243392 (512-rounded) from the 15 MiB: 10485248 left */
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 20 * MIB);
	ck_assert_uint_eq(s.segments, 1);
	ck_assert_uint_eq(s.allocated, 5 * MIB + 5243392);
	ck_assert_uint_eq(s.inactive_split_bytes, 10485248);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 5243392);

	/* 10 MiB is not < kMinLargeAlloc: a 10 MiB segment of its own
	 * (2555-2556), though 10485248 B are free in the first. */
	alloc_ok(a, 3, 10 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 30 * MIB);
	ck_assert_uint_eq(s.segments, 2);
	ck_assert_uint_eq(s.inactive_split_bytes, 10485248);
	cuda_alloc_destroy(a);
}
END_TEST

/* get_allocation_size (A.cpp 2555-2556): 10 MiB and more, a segment of the
 * request rounded up to 2 MiB (kRoundLarge, 128). should_split (2545-2546)
 * refuses when 1 MiB or less remains: the request holds the whole block
 * (alloc_found_block counts block->size, 1445). */
START_TEST(test_large_requests_round_to_2_mib_and_small_remainders_are_not_split)
{
	struct cuda_alloc *a = make(NULL, 0);
	struct cuda_alloc_stats s;

	/* 11 MiB + 1 -> 11534848 (512), segment 6 x 2 MiB = 12582912,
	 * remainder 1048064 <= 1 MiB: not split. */
	alloc_ok(a, 1, 11 * MIB + 1);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 1), 12582912);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 12582912);
	ck_assert_uint_eq(s.allocated, 12582912);
	ck_assert_uint_eq(s.inactive_split, 0);
	ck_assert_uint_eq(s.cached_blocks, 0);

	/* 21 MiB -> a 22 MiB segment: exactly 1 MiB remains, and the rule is
	 * "> kSmallSize": still not split. */
	alloc_ok(a, 2, 21 * MIB);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 22 * MIB);
	/* 20 MiB + 512 -> 22 MiB: 2 MiB - 512 remain, over 1 MiB: split. */
	alloc_ok(a, 3, 20 * MIB + 512);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 3), 20 * MIB + 512);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 12 * MIB + 22 * MIB + 22 * MIB);
	ck_assert_uint_eq(s.segments, 3);
	ck_assert_uint_eq(s.inactive_split, 1);
	ck_assert_uint_eq(s.inactive_split_bytes, 2 * MIB - 512);
	cuda_alloc_destroy(a);
}
END_TEST

/* free_block (A.cpp 2397-2470) with try_merge_blocks (2474-2505): a freed
 * block joins its free neighbours of the segment; inactive_split counts the
 * free parts of split segments. The segment stays reserved (no cudaFree
 * outside release_*: 2923) until empty_cache (1606-1610). */
START_TEST(test_freed_blocks_merge_with_free_neighbours_of_their_segment)
{
	struct cuda_alloc *a = make(NULL, 0);
	struct cuda_alloc_stats s;
	const uint64_t tail = 2 * MIB - 3 * KIB;

	alloc_ok(a, 1, KIB);
	alloc_ok(a, 2, KIB);
	alloc_ok(a, 3, KIB); /* [1][2][3][tail free] in one 2 MiB segment */
	free_ok(a, 2);       /* between two live blocks: no merge */
	s = stats(a);
	ck_assert_uint_eq(s.inactive_split, 2);
	ck_assert_uint_eq(s.inactive_split_bytes, KIB + tail);
	ck_assert_uint_eq(s.cached_blocks, 2);
	free_ok(a, 1);       /* [1+2 free][3][tail]: 2 KiB and the tail */
	s = stats(a);
	ck_assert_uint_eq(s.inactive_split, 2);
	ck_assert_uint_eq(s.inactive_split_bytes, 2 * KIB + tail);
	ck_assert_uint_eq(s.cached_blocks, 2);
	free_ok(a, 3);       /* all one 2 MiB block again, no longer split */
	s = stats(a);
	ck_assert_uint_eq(s.inactive_split, 0);
	ck_assert_uint_eq(s.inactive_split_bytes, 0);
	ck_assert_uint_eq(s.cached_blocks, 1);
	ck_assert_uint_eq(s.cached_bytes, 2 * MIB);
	ck_assert_uint_eq(s.reserved, 2 * MIB);
	ck_assert_uint_eq(s.allocated, 0);
	ck_assert_uint_eq(s.device_frees, 0);

	/* A whole segment again: a request now reuses it (no new cudaMalloc). */
	alloc_ok(a, 4, 100);
	s = stats(a);
	ck_assert_uint_eq(s.device_allocs, 1);
	free_ok(a, 4);
	cuda_alloc_empty_cache(a);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 0);
	ck_assert_uint_eq(s.segments, 0);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.reserved_peak, 2 * MIB);
	cuda_alloc_destroy(a);
}
END_TEST

/* malloc (A.cpp 1234-1242): cudaMalloc fails -> release_available_cached_
 * blocks (nothing without max_split_size_mb, 2814-2816) -> release_cached_
 * blocks (every cached block that is a whole segment, 3045-3068) -> retry
 * (num_alloc_retries, 2704-2706) -> OutOfMemoryError (num_ooms, 1268). */
START_TEST(test_a_failed_cudamalloc_frees_whole_cached_segments_and_retries)
{
	struct cuda_alloc *a = make(NULL, 60 * MIB);
	struct cuda_alloc_stats s;

	alloc_ok(a, 1, 30 * MIB);
	free_ok(a, 1);            /* a cached 30 MiB segment */
	alloc_ok(a, 2, 40 * MIB); /* 30 + 40 > 60: free the 30, retry: 40 */
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 40 * MIB);
	ck_assert_uint_eq(s.segments, 1);
	ck_assert_uint_eq(s.device_allocs, 2);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.alloc_retries, 1);
	ck_assert_uint_eq(s.reserved_peak, 40 * MIB);

	/* 40 + 30 > 60 and nothing is cached: the retry fails too. */
	ck_assert_int_eq(cuda_alloc_alloc(a, 3, 30 * MIB, NULL), CUDA_ALLOC_OOM);
	s = stats(a);
	ck_assert_uint_eq(s.ooms, 1);
	ck_assert_uint_eq(s.alloc_retries, 2);
	ck_assert_uint_eq(s.reserved, 40 * MIB);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 3), 0);
	cuda_alloc_destroy(a);
}
END_TEST

/* release_blocks (A.cpp 3057-3059) frees only blocks with no neighbours:
 * the free remainder of a split segment stays reserved. */
START_TEST(test_the_oom_retry_keeps_split_segments)
{
	struct cuda_alloc *a = make(NULL, 40 * MIB);
	struct cuda_alloc_stats s;

	alloc_ok(a, 1, 5 * MIB);  /* 20 MiB segment, 15 MiB free remainder */
	alloc_ok(a, 2, 16 * MIB); /* over the 15: a 16 MiB segment */
	free_ok(a, 2);
	/* 18 MiB: no cached block fits (15, 16); 36 + 18 > 40; the 16 MiB
	 * goes back, the 15 MiB remainder cannot; 20 + 18 <= 40. */
	alloc_ok(a, 3, 18 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 38 * MIB);
	ck_assert_uint_eq(s.segments, 2);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.alloc_retries, 1);
	ck_assert_uint_eq(s.inactive_split_bytes, 15 * MIB);
	ck_assert_uint_eq(s.reserved_peak, 38 * MIB);
	cuda_alloc_destroy(a);
}
END_TEST

/* max_split_size_mb (C.cpp 78-97): get_free_block (A.cpp 2606-2615) gives
 * an oversize cached block (>= max_split_size) to no request under
 * max_split_size, and to a larger one only when it is less than
 * max_non_split_rounding_size (20 MiB by default, C.cpp 15) bigger;
 * should_split (2545) never splits for a request of max_split_size or
 * more. */
START_TEST(test_max_split_size_keeps_oversize_blocks_whole)
{
	struct cuda_alloc *a = make("max_split_size_mb:100", 0);
	struct cuda_alloc_stats s;

	alloc_ok(a, 1, 150 * MIB);
	free_ok(a, 1);            /* a cached oversize 150 MiB block */
	alloc_ok(a, 2, 50 * MIB); /* 50 < 100: the 150 is refused, a new 50 MiB segment */
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 200 * MIB);
	alloc_ok(a, 3, 140 * MIB); /* 150 < 140 + 20: taken whole, not split */
	ck_assert_uint_eq(cuda_alloc_block_size(a, 3), 150 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 200 * MIB);
	ck_assert_uint_eq(s.allocated, 200 * MIB);
	ck_assert_uint_eq(s.inactive_split, 0);
	free_ok(a, 3);
	alloc_ok(a, 4, 120 * MIB); /* 150 >= 120 + 20: refused, a new 120 MiB segment */
	ck_assert_uint_eq(cuda_alloc_block_size(a, 4), 120 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 320 * MIB);
	ck_assert_uint_eq(s.segments, 3);
	cuda_alloc_destroy(a);

	/* The bound is strict: 150 >= 130 + 20 is refused (2612-2613). */
	a = make("max_split_size_mb:100", 0);
	alloc_ok(a, 1, 150 * MIB);
	free_ok(a, 1);
	alloc_ok(a, 2, 130 * MIB);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 130 * MIB);
	ck_assert_uint_eq(stats(a).reserved, 280 * MIB);
	cuda_alloc_destroy(a);

	/* Without the option the same trace splits the 150 for the 50 MiB
	 * (2545-2546: 100 MiB remain) and reserves 150 MiB only... */
	a = make(NULL, 0);
	alloc_ok(a, 1, 150 * MIB);
	free_ok(a, 1);
	alloc_ok(a, 2, 50 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 150 * MIB);
	ck_assert_uint_eq(s.inactive_split_bytes, 100 * MIB);
	cuda_alloc_destroy(a);

	/* ...and max_non_split_rounding_mb widens the reuse (C.cpp 99-118). */
	a = make("max_split_size_mb:100,max_non_split_rounding_mb:40", 0);
	alloc_ok(a, 1, 150 * MIB);
	free_ok(a, 1);
	alloc_ok(a, 2, 120 * MIB); /* 150 < 120 + 40 */
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 150 * MIB);
	ck_assert_uint_eq(stats(a).reserved, 150 * MIB);
	cuda_alloc_destroy(a);
}
END_TEST

/* release_available_cached_blocks (A.cpp 2811-2857), with max_split_size
 * set: the smallest cached block of at least the request is freed (2854);
 * when none is that large, the largest oversize ones from the top until
 * as much as the request is freed (2826-2851), and if less is, it returns
 * false — what it freed stays freed — and release_cached_blocks and the
 * retry follow (1240-1242). */
START_TEST(test_release_available_cached_blocks_frees_oversize_blocks)
{
	struct cuda_alloc *a;
	struct cuda_alloc_stats s;

	/* One block large enough: 150 cached, 125 MiB -> a 126 MiB segment;
	 * get_free_block refuses the 150 (>= 125 + 20), 150 + 126 > 250. */
	a = make("max_split_size_mb:100", 250 * MIB);
	alloc_ok(a, 1, 150 * MIB);
	free_ok(a, 1);
	alloc_ok(a, 2, 125 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 126 * MIB);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.alloc_retries, 0);
	cuda_alloc_destroy(a);

	/* None large enough: 150 and 120 cached, 160 MiB wanted; 150 then 120
	 * go (270 >= 160), then cudaMalloc succeeds without a retry. */
	a = make("max_split_size_mb:100", 300 * MIB);
	alloc_ok(a, 1, 150 * MIB);
	alloc_ok(a, 2, 120 * MIB);
	free_ok(a, 1);
	free_ok(a, 2);
	alloc_ok(a, 3, 160 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 160 * MIB);
	ck_assert_uint_eq(s.device_frees, 2);
	ck_assert_uint_eq(s.alloc_retries, 0);
	cuda_alloc_destroy(a);

	/* Not enough: 150 cached, 200 wanted on 300: the 150 is freed but
	 * 150 < 200, so false; release_cached_blocks, then the retry. */
	a = make("max_split_size_mb:100", 300 * MIB);
	alloc_ok(a, 1, 150 * MIB);
	free_ok(a, 1);
	alloc_ok(a, 2, 200 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 200 * MIB);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.alloc_retries, 1);
	cuda_alloc_destroy(a);
}
END_TEST

/* Expandable segments (Note, A.cpp 279-356): one segment a pool, grown in
 * 20 MiB pages for the large pool (segment_size, 2272) by map_block
 * (2295-2361), a page a cuMemCreate (num_device_alloc, 2348; no
 * segment.* stat); try_allocate_expandable_block (2363-2394) maps after a
 * free block at the end to make one block of the request's size (not
 * get_allocation_size's); should_split (2542-2543): any >= 512 B remainder
 * splits. */
START_TEST(test_expandable_segments_grow_in_pages)
{
	struct cuda_alloc *a = make("expandable_segments:True", 0);
	struct cuda_alloc_stats s;

	alloc_ok(a, 1, 5 * MIB);  /* one 20 MiB page, 15 MiB free after it */
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 20 * MIB);
	ck_assert_uint_eq(s.device_allocs, 1);
	ck_assert_uint_eq(s.segments, 0);
	ck_assert_uint_eq(s.expandable_segments, 1);
	ck_assert_uint_eq(s.inactive_split, 0); /* not counted for expandable (2446-2451) */
	alloc_ok(a, 2, 30 * MIB); /* the 15 MiB free + one more page: 35 MiB, split 30 + 5 */
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 30 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 40 * MIB);
	ck_assert_uint_eq(s.device_allocs, 2);
	ck_assert_uint_eq(s.cached_bytes, 5 * MIB);
	ck_assert_uint_eq(s.expandable_segments, 1);

	/* Freed and emptied: release_blocks unmaps the whole pages
	 * (unmap_block, 2974-3043) and, nothing being mapped, the segment
	 * goes (release_expandable_segment, 2907-2921). */
	free_ok(a, 2);
	free_ok(a, 1);
	cuda_alloc_empty_cache(a);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 0);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.expandable_segments, 0);
	cuda_alloc_destroy(a);

	/* The same trace without: 20 MiB for the 5, 30 MiB for the 30. */
	a = make(NULL, 0);
	alloc_ok(a, 1, 5 * MIB);
	alloc_ok(a, 2, 30 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 50 * MIB);
	ck_assert_uint_eq(s.segments, 2);
	cuda_alloc_destroy(a);

	/* The small pool's pages are 2 MiB (2272): 1000 B maps one. */
	a = make("expandable_segments:True", 0);
	alloc_ok(a, 1, 1000);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 2 * MIB);
	ck_assert_uint_eq(s.expandable_segments, 1);
	cuda_alloc_destroy(a);
}
END_TEST

/* Under expandable segments a page that does not fit on the device fails
 * the map (ExpandableSegment::map, A.cpp 406-415); the OOM path unmaps
 * the free whole pages (release_blocks, 3052-3066) and maps again. */
START_TEST(test_expandable_segments_unmap_free_pages_on_oom)
{
	struct cuda_alloc *a = make("expandable_segments:True", 60 * MIB);
	struct cuda_alloc_stats s;

	alloc_ok(a, 1, 30 * MIB); /* pages 0-1 mapped (40 MiB): [30][10 free] */
	alloc_ok(a, 2, 5 * MIB);  /* from the 10 MiB: [30][5][5 free] */
	free_ok(a, 1);            /* [30 free][5][5 free | unmapped...] */
	/* 45 MiB: no cached block fits. The unmapped tail with the 5 MiB
	 * free before it is the candidate (find_expandable_block, 2254-2269);
	 * 40 MiB more need pages 2-3, 40 + 40 > 60: the map fails. No
	 * max_split_size: release_cached_blocks unmaps the whole pages of
	 * the free blocks: page 0 of the 30 MiB block (page 1 holds the live
	 * 5 MiB too, and the 5 MiB free block has no whole page): 20 MiB
	 * left. The retry maps pages 2-3: 20 + 40 = 60. */
	alloc_ok(a, 3, 45 * MIB);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 3), 45 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 60 * MIB);
	ck_assert_uint_eq(s.alloc_retries, 1);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.cached_bytes, 10 * MIB); /* the part of page 1 before the live 5 MiB */
	/* num_device_alloc counts map_block calls (2348), not pages: the
	 * first map (2 pages) and the retry's (2 pages). */
	ck_assert_uint_eq(s.device_allocs, 2);
	cuda_alloc_destroy(a);
}
END_TEST

/* roundup_power2_divisions (C.cpp 138-217, A.cpp 2043-2074): a size over
 * 512 B x divisions goes up to the next of `divisions` steps between its
 * powers of two. The intervals start at 1 MiB (C.cpp 29-41), and the first
 * also holds every smaller size. */
START_TEST(test_roundup_power2_divisions)
{
	struct cuda_alloc *a = make("roundup_power2_divisions:4", 0);

	/* 1100000 B: between 1 MiB and 2 MiB, steps of 256 KiB: 1310720. */
	alloc_ok(a, 1, 1100000);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 1), 1310720);
	/* 1200 B: not over 512 x 4 = 2048, so 512-rounded: 1536. */
	alloc_ok(a, 2, 1200);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 1536);
	/* 4200 B: over 2048: steps of 1024 between 4096 and 8192: 5120
	 * (512-rounding would give 4608). */
	alloc_ok(a, 3, 4200);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 3), 5120);
	/* A power of two stays (2044-2046). */
	alloc_ok(a, 4, 4 * MIB);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 4), 4 * MIB);
	cuda_alloc_destroy(a);

	a = make(NULL, 0); /* off: 512-rounded, 1100288 */
	alloc_ok(a, 1, 1100000);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 1), 1100288);
	cuda_alloc_destroy(a);

	/* The list form: [256:1,512:2,>:4]. "256" is interval 8 (256-512
	 * MiB) and fills 0-7 too (first_value, 182-191); ">" fills from the
	 * last index given, 9, on (163-170), so 512 MiB-1 GiB gets 4, not 2:
	 * 600 MiB -> 640 MiB (steps of 128 MiB), where 2 would give 768. */
	a = make("roundup_power2_divisions:[256:1,512:2,>:4]", 0);
	alloc_ok(a, 1, 600 * MIB);
	ck_assert_uint_eq(cuda_alloc_block_size(a, 1), 640 * MIB);
	alloc_ok(a, 2, 300 * MIB + 1); /* interval 8: 1 division, 512-rounded */
	ck_assert_uint_eq(cuda_alloc_block_size(a, 2), 300 * MIB + 512);
	cuda_alloc_destroy(a);
}
END_TEST

/* garbage_collection_threshold acts only under a memory fraction
 * (A.cpp 1224-1228): over threshold x allowed (2635-2641), cached whole
 * segments of at least the mean age go before cudaMalloc (2655-2684). The
 * fraction caps what alloc_block may reserve (2713-2716). */
START_TEST(test_garbage_collection_under_a_memory_fraction)
{
	struct cuda_alloc_opts o;
	struct cuda_alloc *a;
	struct cuda_alloc_stats s;
	char *cause = NULL;

	/* 100 MiB device, fraction 0.5: 50 MiB allowed; threshold 0.5: 25. */
	cuda_alloc_opts_default(&o);
	o.memory_fraction = 0.5;
	ck_assert_int_eq(cuda_alloc_parse_conf("garbage_collection_threshold:0.5", &o, &cause), 0);
	a = cuda_alloc_create(&o, 100 * MIB, &cause);
	ck_assert_ptr_nonnull(a);
	alloc_ok(a, 1, 30 * MIB);
	free_ok(a, 1);
	/* 40 MiB: 30 reserved > 25, the 30 MiB block (age 1 >= mean 1) is
	 * collected before cudaMalloc: no retry. */
	alloc_ok(a, 2, 40 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.reserved, 40 * MIB);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.alloc_retries, 0);
	/* 20 MiB more: 40 + 20 > 50 allowed, nothing cached: OOM, though the
	 * device has 60 MiB free. */
	ck_assert_int_eq(cuda_alloc_alloc(a, 3, 20 * MIB, NULL), CUDA_ALLOC_OOM);
	cuda_alloc_destroy(a);

	/* Without the threshold the 30 MiB goes only in the OOM retry. */
	cuda_alloc_opts_default(&o);
	o.memory_fraction = 0.5;
	a = cuda_alloc_create(&o, 100 * MIB, &cause);
	alloc_ok(a, 1, 30 * MIB);
	free_ok(a, 1);
	alloc_ok(a, 2, 40 * MIB);
	s = stats(a);
	ck_assert_uint_eq(s.device_frees, 1);
	ck_assert_uint_eq(s.alloc_retries, 1);
	cuda_alloc_destroy(a);

	/* A fraction needs a device size. */
	ck_assert_ptr_null(cuda_alloc_create(&o, 0, &cause));
	ck_assert_ptr_nonnull(strstr(cause, "device"));
	free(cause);
}
END_TEST

START_TEST(test_ids_and_zero_byte_requests)
{
	struct cuda_alloc *a = make(NULL, 0);
	char *cause = NULL;

	alloc_ok(a, 7, 0); /* allocate(0) never calls malloc (A.cpp 3637) */
	ck_assert_uint_eq(stats(a).reserved, 0);
	ck_assert_uint_eq(stats(a).live, 1);
	ck_assert_int_eq(cuda_alloc_alloc(a, 7, 10, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "7"));
	free(cause);
	cause = NULL;
	free_ok(a, 7);
	ck_assert_int_eq(cuda_alloc_free(a, 7, &cause), -1);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(cuda_alloc_alloc(a, 8, (uint64_t)1 << 60, &cause), -1); /* one exabyte (3622-3626) */
	free(cause);
	cuda_alloc_destroy(a);
}
END_TEST

/* PyTorch's refusals (C.cpp 78-217, 260-353) and the replay's own. */
START_TEST(test_bad_conf_strings_are_refused_naming_the_option)
{
	static const struct {
		const char *conf, *word;
	} bad[] = {
		{ "max_split_size_mb:20", "max_split_size_mb" },
		{ "max_split_size_mb:abc", "max_split_size_mb" },
		{ "max_non_split_rounding_mb:10", "max_non_split_rounding_mb" },
		{ "roundup_power2_divisions:3", "roundup_power2_divisions" },
		{ "roundup_power2_divisions:[256:3]", "roundup_power2_divisions" },
		{ "roundup_power2_divisions:[300:2]", "roundup_power2_divisions" },
		{ "roundup_power2_divisions:[256:2", "roundup_power2_divisions" },
		{ "garbage_collection_threshold:1.0", "garbage_collection_threshold" },
		{ "garbage_collection_threshold:0", "garbage_collection_threshold" },
		{ "expandable_segments:true", "expandable_segments" },
		{ "expandable_segments", "expandable_segments" },
		{ "backend:cudaMallocAsync", "cudaMallocAsync" },
		{ "max_split_mb:100", "max_split_mb" },
		/* spaces are dropped (C.cpp 58): "Truemax_split_size_mb" */
		{ "expandable_segments:True max_split_size_mb:100", "expandable_segments" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cuda_alloc_opts o;
		char *cause = NULL;

		cuda_alloc_opts_default(&o);
		ck_assert_msg(cuda_alloc_parse_conf(bad[i].conf, &o, &cause) == -1, "accepted %s", bad[i].conf);
		ck_assert_msg(cause != NULL && strstr(cause, bad[i].word) != NULL, "%s: %s", bad[i].conf,
			      cause ? cause : "(no cause)");
		free(cause);
	}

	struct cuda_alloc_opts o;
	char *cause = NULL;

	cuda_alloc_opts_default(&o);
	ck_assert_int_eq(cuda_alloc_parse_conf(" expandable_segments : True , max_split_size_mb:512,"
					       "backend:native,roundup_power2_divisions:[>:8]",
					       &o, &cause), 0);
	ck_assert_int_eq(o.expandable_segments, 1);
	ck_assert_uint_eq(o.max_split_size, 512 * MIB);
	ck_assert_uint_eq(o.roundup_divisions[0], 8);
	ck_assert_uint_eq(o.roundup_divisions[CUDA_ALLOC_DIV_INTERVALS - 1], 8);
	ck_assert_int_eq(cuda_alloc_parse_conf("", &o, &cause), 0);
	ck_assert_uint_eq(o.max_split_size, UINT64_MAX);
	ck_assert_int_eq(o.expandable_segments, 0);
}
END_TEST

/* What every trace keeps: each mapped byte is allocated or cached; the
 * peak is at least the current; a trace freed in full and emptied gives
 * every byte back (and no segment stays split). */
START_TEST(test_random_traces_keep_the_books)
{
	static const char *const confs[] = {
		NULL, "expandable_segments:True", "max_split_size_mb:64", "roundup_power2_divisions:4",
		"max_split_size_mb:64,roundup_power2_divisions:[1:2,64:8,>:1]",
	};
	static const uint64_t devices[] = { 0, 512 * MIB };

	for (size_t c = 0; c < sizeof(confs) / sizeof(confs[0]); c++)
		for (size_t d = 0; d < 2; d++) {
			struct cuda_alloc *a = make(confs[c], devices[d]);
			uint64_t live[64] = { 0 }, sum = 0, rng = 0x9e3779b97f4a7c15ULL ^ (c * 31 + d);
			int on[64] = { 0 };

			for (int step = 0; step < 4000; step++) {
				rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
				unsigned k = (unsigned)(rng >> 58);
				uint64_t r = rng >> 20;

				if (on[k]) {
					free_ok(a, k);
					sum -= live[k];
					on[k] = 0;
				} else {
					static const uint64_t scale[4] = { 4096, MIB, 8 * MIB, 96 * MIB };
					uint64_t bytes = 1 + r % scale[(r >> 40) & 3];
					int rc = cuda_alloc_alloc(a, k, bytes, NULL);

					ck_assert_int_ge(rc, 0);
					if (rc == 0) {
						on[k] = 1;
						live[k] = cuda_alloc_block_size(a, k);
						ck_assert_uint_ge(live[k], bytes);
						sum += live[k];
					}
				}
				struct cuda_alloc_stats s = stats(a);

				ck_assert_uint_eq(s.allocated, sum);
				ck_assert_uint_eq(s.allocated + s.cached_bytes, s.reserved);
				ck_assert_uint_le(s.reserved, s.reserved_peak);
				if (devices[d] != 0)
					ck_assert_uint_le(s.reserved, devices[d]);
			}
			for (unsigned k = 0; k < 64; k++)
				if (on[k])
					free_ok(a, k);
			cuda_alloc_empty_cache(a);
			struct cuda_alloc_stats s = stats(a);

			ck_assert_uint_eq(s.reserved, 0);
			ck_assert_uint_eq(s.segments, 0);
			ck_assert_uint_eq(s.inactive_split_bytes, 0);
			/* An expandable segment made for a request whose first map
			 * did not fit stays, holding no page (none of its blocks is
			 * ever in the pool, which release_blocks walks: A.cpp
			 * 2272-2292, 3049-3067); the next request finds it first. */
			ck_assert_uint_le(s.expandable_segments, devices[d] != 0 && s.ooms > 0 ? 1 : 0);
			cuda_alloc_destroy(a);
		}
}
END_TEST

static Suite *cuda_alloc_suite(void)
{
	Suite *s = suite_create("cuda_alloc");
	TCase *rules = tcase_create("rules");
	TCase *opts = tcase_create("options");

	tcase_add_test(rules, test_small_pool_packs_requests_into_2_mib_segments);
	tcase_add_test(rules, test_medium_requests_share_20_mib_segments);
	tcase_add_test(rules, test_large_requests_round_to_2_mib_and_small_remainders_are_not_split);
	tcase_add_test(rules, test_freed_blocks_merge_with_free_neighbours_of_their_segment);
	tcase_add_test(rules, test_a_failed_cudamalloc_frees_whole_cached_segments_and_retries);
	tcase_add_test(rules, test_the_oom_retry_keeps_split_segments);
	tcase_add_test(rules, test_ids_and_zero_byte_requests);
	tcase_add_test(rules, test_random_traces_keep_the_books);
	tcase_add_test(opts, test_max_split_size_keeps_oversize_blocks_whole);
	tcase_add_test(opts, test_release_available_cached_blocks_frees_oversize_blocks);
	tcase_add_test(opts, test_expandable_segments_grow_in_pages);
	tcase_add_test(opts, test_expandable_segments_unmap_free_pages_on_oom);
	tcase_add_test(opts, test_roundup_power2_divisions);
	tcase_add_test(opts, test_garbage_collection_under_a_memory_fraction);
	tcase_add_test(opts, test_bad_conf_strings_are_refused_naming_the_option);
	suite_add_tcase(s, rules);
	suite_add_tcase(s, opts);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cuda_alloc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
