/*
 * bench_floor — what `zerosim measure --layers 1024,4096,1024 --world 16
 * --steps 1` cannot avoid, measured on the machine at hand with one
 * thread: faulting in the DP run's memory in 4 KiB pages, and streaming
 * the bytes the rank-steps of all four schemes must read and write. Built
 * for `make bench` only; tests/bench.sh divides the large case's time by it.
 *
 * The count, from the model's shape alone (docs/schedule.md; mixed
 * precision, Adam: p = g = 2, k = 12; one step; batch 4):
 *
 *   Ψ = 1024·4096 + 4096 + 4096·1024 + 1024 = 8,393,728 parameters,
 *   N = 16, S = ceil(Ψ/N) = 524,608 (no padding: 16 divides Ψ).
 *
 *   Faults: the DP run holds 16 ranks × Ψ(p+g+k) = 16 × 16Ψ = 2,148,794,368
 *   bytes of model state, 524,608 pages of 4 KiB, each faulted in once.
 *
 *   Bytes every rank moves in its step (E = the elements whose optimizer
 *   state it owns: Ψ for dp, S for zero1/2/3):
 *     state written once          params and optimizer state: dp 14Ψ,
 *                                 zero1 2Ψ+12S, zero2 2Ψ+12S, zero3 14S (the
 *                                 grads' first write is the backward's, or
 *                                 the reduce-scatter's into a shard, below)
 *     forward: weights read       pΨ (every scheme)
 *     backward: weight grads      gΨ written; weights of layers 1..L-1 read
 *                                 for the input gradients (layer 0 has
 *                                 none): p·4096·1024 = 8,388,608
 *     Adam: master, m, v and the  (k + g)E read, (k + p)E written = 28E
 *     reduced grad read; master,
 *     m, v and the working param
 *     written
 *     collectives, source read    dp all-reduce in place: gΨ read, gΨ written;
 *     once and destination        zero1, zero2: reduce-scatter (gΨ read, gS
 *     written once                written) and all-gather (pS read, pΨ
 *                                 written); zero3: two all-gathers and one
 *                                 reduce-scatter, 3 × (2Ψ + 2S)
 *   Per rank: dp 50Ψ + 8,388,608 = 428,075,008 B; zero1 115,408,640 B;
 *   zero2 115,408,640 B; zero3 117,507,072 B; their sum × 16 ranks =
 *   12,422,389,760 B, of which 4,985,546,752 read and 7,436,843,008 written.
 *   Activations (b·Σd·4 = 114,688 B per rank) and the loss are left out.
 *
 * The floor is the fault time plus reads at the measured read bandwidth
 * plus writes at the measured write bandwidth, each the best of several
 * passes over a buffer far larger than the caches. It is a floor, not a
 * model: a run that reached it would do nothing but touch its bytes once.
 *
 * Two floors, which differ only in the page size the state is faulted in:
 * 4 KiB pages (what a heap without transparent huge pages gets), and
 * 2 MiB pages advised as zerosim's heap advises its own (src/engine/heap.c:
 * madvise(MADV_HUGEPAGE) on the range, the kernel's THP policy deciding).
 * The 2 MiB one is what the memory system costs zerosim's own process, so
 * the ratio to it is what the code costs beyond that. Where the kernel
 * gives no huge pages, the two come out alike. Each is the best of two
 * passes: on a loaded virtual machine the first 2 MiB pass of a process
 * was seen to cost 3 to 5 s of CPU against 0.4 to 1.9 s for the second
 * (the kernel finding and clearing huge pages), and a zerosim run, which
 * faults its heap once, pays anything between the two; its system time
 * is the part of the ratio that moves from run to run.
 *
 * Output: one line per measurement, then "floor_seconds T" (wall time)
 * and "floor_cpu_seconds C" (the thread's user and system time for the
 * same work, which a busy machine disturbs less) for 4 KiB pages, and
 * "floor2m_seconds" and "floor2m_cpu_seconds" for 2 MiB pages.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096u
#define STREAM_BYTES (512u << 20) /* the streaming buffer: far beyond any cache */
#define PASSES 5

struct traffic {
	double read, written;
};

/* Wall time and this thread's CPU time (user and system), in seconds. */
struct stamp {
	double wall, cpu;
};

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct stamp now(void)
{
	struct stamp t = {clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_THREAD_CPUTIME_ID)};
	return t;
}

/* Keep in *best the shortest wall and the shortest CPU time of b - a. */
static void keep_best(struct stamp *best, struct stamp a, struct stamp b)
{
	if (b.wall - a.wall < best->wall)
		best->wall = b.wall - a.wall;
	if (b.cpu - a.cpu < best->cpu)
		best->cpu = b.cpu - a.cpu;
}

/* The bytes above, from the shape. */
static struct traffic large_case(double *fault_bytes)
{
	const double d0 = 1024, d1 = 4096, d2 = 1024, N = 16, p = 2, g = 2, k = 12;
	const double psi = d0 * d1 + d1 + d1 * d2 + d2;
	const double S = psi / N; /* exact: 16 divides Ψ */
	const double bw_read = p * d1 * d2; /* layer 1's weights, for layer 0's input gradient */
	struct traffic t = {0, 0};
	/* per scheme: params and optimizer state, elements owned, collectives
	 * read / written */
	const double state[4] = {psi * (p + k), psi * p + S * k, psi * p + S * k, S * (p + k)};
	const double owned[4] = {psi, S, S, S};
	const double coll_read[4] = {g * psi, g * psi + p * S, g * psi + p * S, 2 * p * S + g * psi};
	const double coll_written[4] = {g * psi, g * S + p * psi, g * S + p * psi,
	                                2 * p * psi + g * S};

	for (int s = 0; s < 4; s++) {
		t.read += N * (p * psi + bw_read + (k + g) * owned[s] + coll_read[s]);
		t.written += N * (state[s] + g * psi + (k + p) * owned[s] + coll_written[s]);
	}
	*fault_bytes = N * psi * (p + g + k);
	return t;
}

static void *map(size_t n, int advice)
{
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("bench_floor: mmap");
		exit(1);
	}
	(void)madvise(m, n, advice); /* where the kernel has no THP, this fails harmlessly */
	return m;
}

/* Time to fault in n bytes of fresh anonymous memory, one write every
 * 4 KiB: under MADV_NOHUGEPAGE each write faults a 4 KiB page; under
 * MADV_HUGEPAGE (the heap's advice) the first write in each 2 MiB block
 * faults the whole block and the other 511 find it there. The range is
 * aligned to 2 MiB so that every block can be a huge page. */
static struct stamp fault_time(size_t n, int advice)
{
	struct stamp best = {1e30, 1e30};
	const size_t huge = 2u << 20;
	for (int pass = 0; pass < 2; pass++) {
		char *raw = map(n + huge, advice);
		volatile char *m = (volatile char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
		struct stamp t0 = now();
		for (size_t i = 0; i < n; i += PAGE)
			m[i] = 1;
		keep_best(&best, t0, now());
		munmap(raw, n + huge);
	}
	return best;
}

static volatile uint64_t sink;

/* Time to read and to write STREAM_BYTES once, the best of PASSES. */
static void stream_time(struct stamp *read, struct stamp *write)
{
	uint64_t *buf = map(STREAM_BYTES, MADV_HUGEPAGE);
	const size_t n = STREAM_BYTES / sizeof *buf;

	*read = *write = (struct stamp){1e30, 1e30};
	memset(buf, 1, STREAM_BYTES); /* faulted in before any timing */
	for (int pass = 0; pass < PASSES; pass++) {
		struct stamp t0 = now();
		memset(buf, pass, STREAM_BYTES);
		struct stamp t1 = now();
		uint64_t a = 0, b = 0, c = 0, d = 0;
		for (size_t i = 0; i < n; i += 4) {
			a += buf[i];
			b += buf[i + 1];
			c += buf[i + 2];
			d += buf[i + 3];
		}
		sink = a + b + c + d;
		struct stamp t2 = now();
		keep_best(write, t0, t1);
		keep_best(read, t1, t2);
	}
	munmap(buf, STREAM_BYTES);
}

int main(void)
{
	double fault_bytes;
	struct traffic t = large_case(&fault_bytes);
	struct stamp tf = fault_time((size_t)fault_bytes, MADV_NOHUGEPAGE);
	struct stamp th = fault_time((size_t)fault_bytes, MADV_HUGEPAGE), r, w;
	stream_time(&r, &w);
	/* Seconds for the large case's bytes at the measured rates. */
	double ts = (t.read * r.wall + t.written * w.wall) / STREAM_BYTES;
	double cs = (t.read * r.cpu + t.written * w.cpu) / STREAM_BYTES;

	printf("fault in %.3f GB in 4 KiB pages:        %7.3f s (%.2f GB/s; CPU %.3f s)\n",
	       fault_bytes / 1e9, tf.wall, fault_bytes / tf.wall / 1e9, tf.cpu);
	printf("fault in %.3f GB in 2 MiB pages:        %7.3f s (%.2f GB/s; CPU %.3f s)\n",
	       fault_bytes / 1e9, th.wall, fault_bytes / th.wall / 1e9, th.cpu);
	printf("stream %.3f GB read at %.2f GB/s and %.3f GB written at %.2f GB/s: %7.3f s (CPU %.3f s)\n",
	       t.read / 1e9, STREAM_BYTES / r.wall / 1e9, t.written / 1e9, STREAM_BYTES / w.wall / 1e9, ts,
	       cs);
	printf("floor_seconds %.3f\n", tf.wall + ts);
	printf("floor_cpu_seconds %.3f\n", tf.cpu + cs);
	printf("floor2m_seconds %.3f\n", th.wall + ts);
	printf("floor2m_cpu_seconds %.3f\n", th.cpu + cs);
	return 0;
}
