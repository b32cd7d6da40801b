/*
 * test_coll_mpi — the MPI backend's collectives against the in-process
 * backend's, bit for bit. Run under mpirun with any number of processes P
 * (tests/mpi_coll.sh runs P = 1..4): every process builds every rank's
 * inputs, runs the in-process backend over all N ranks as the reference,
 * runs the MPI backend over the ranks it holds, and compares those ranks'
 * outputs byte for byte, padding slots included (neither backend writes
 * them). N runs over P, 2P and 3P; unit sizes over 1, below N, not a
 * multiple of N; staging as built, and small enough for many chunks.
 *
 * The bytes handed to MPI are checked against the ring cost: at P = N
 * (one rank per process) a rank's all-to-all sends exactly what a ring
 * reduce-scatter would, (N-1)/N of the padded buffer.
 *
 * Collectives must be entered by every process in the same order, so a
 * mismatch is counted, not asserted, until the test's last line.
 */
#include "config.h"

#include <check.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/coll.h"
#include "engine/coll_mpi.h"
#include "engine/fp16.h"
#include "util/util.h"

static int nproc, me;
static unsigned failures;

#define EXPECT(cond, ...)                                                                                              \
	do {                                                                                                               \
		if (!(cond)) {                                                                                                 \
			if (failures++ < 10) {                                                                                     \
				fprintf(stderr, "process %d: ", me);                                                                    \
				fprintf(stderr, __VA_ARGS__);                                                                           \
				fputc('\n', stderr);                                                                                    \
			}                                                                                                          \
		}                                                                                                              \
	} while (0)

/* Every process agrees on the outcome before the test ends. */
static void settle(void)
{
	unsigned all = 0;
	MPI_Allreduce(&failures, &all, 1, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD);
	failures = 0;
	ck_assert_msg(all == 0, "%u mismatches between the MPI and in-process backends", all);
}

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x >> 11;
}

/* Rank r's n inputs: floats in [-1, 1) with 24 bits, or their halves. */
static void *inputs(unsigned r, size_t n, size_t extra, enum zs_dtype dt, uint64_t salt)
{
	size_t es = coll_dtype_size(dt);
	char *b = zs_malloc((n + extra) * es);
	memset(b, 0xab, (n + extra) * es);
	uint64_t x = salt * 1000003u + r + 1;
	for (size_t i = 0; i < n; i++) {
		float v = (float)((double)(lcg(&x) >> 29) / 8388608.0 - 1.0);
		if (dt == ZS_F16)
			((zs_half *)(void *)b)[i] = zs_float_to_half(v);
		else
			((float *)(void *)b)[i] = v;
	}
	return b;
}

enum op { OP_AR, OP_RS, OP_RS_IN_PLACE, OP_AG, OP_AG_IN_PLACE, OP_BC };
static const char *const op_names[] = {"all-reduce", "reduce-scatter", "reduce-scatter in place", "all-gather",
                                       "all-gather in place", "broadcast"};

/* The broadcast's root for a salt: the first rank, the last, or one
 * between (another process's when there are several). */
static unsigned root_of(unsigned N, uint64_t salt) { return salt % 3 == 0 ? 0 : salt % 3 == 1 ? N - 1 : N / 2; }

/* Run one collective on both backends and compare the local ranks. */
static void check_one(enum op op, unsigned N, size_t n, enum zs_dtype dt, uint64_t salt, size_t stage)
{
	size_t s = coll_shard_len(n, N), es = coll_dtype_size(dt);
	/* Full buffers hold n elements; in place, the shard of the last rank
	 * may reach past them, so they get N·s. */
	size_t extra = N * s - n;
	void **full[2], **shard[2];
	struct zs_coll c[2];
	char *cause = NULL;
	coll_init_inprocess(&c[0], N);
	EXPECT(coll_init_mpi(&c[1], N, &cause) == 0, "coll_init_mpi: %s", cause);
	coll_mpi_set_stage(&c[1], stage);
	for (int b = 0; b < 2; b++) {
		full[b] = zs_calloc(N, sizeof *full[b]);
		shard[b] = zs_calloc(N, sizeof *shard[b]);
		for (unsigned r = 0; r < N; r++) {
			full[b][r] = inputs(r, op == OP_AG || op == OP_AG_IN_PLACE ? 0 : n, extra + n, dt, salt);
			shard[b][r] = inputs(r + N, op == OP_AG ? coll_owned(n, s, r) : 0, s, dt, salt);
			if (op == OP_RS_IN_PLACE)
				shard[b][r] = (char *)full[b][r] + (size_t)r * s * es;
			if (op == OP_AG_IN_PLACE) {
				char *slots = (char *)full[b][r] + (size_t)r * s * es;
				void *own = inputs(r + N, coll_owned(n, s, r), 0, dt, salt);
				memcpy(slots, own, coll_owned(n, s, r) * es);
				free(own);
				shard[b][r] = slots;
			}
		}
	}
	for (int b = 0; b < 2; b++) {
		/* The lists hold the process's ranks, rank k at k - r0. */
		void **f = full[b] + c[b].r0, **sh = shard[b] + c[b].r0;
		switch (op) {
		case OP_AR: coll_all_reduce(&c[b], f, n, dt); break;
		case OP_RS:
		case OP_RS_IN_PLACE:
			coll_reduce_scatter(&c[b], (const void *const *)f, sh, n, dt);
			break;
		case OP_AG:
		case OP_AG_IN_PLACE:
			coll_all_gather(&c[b], (const void *const *)sh, f, n, dt);
			break;
		case OP_BC: coll_broadcast(&c[b], f, root_of(N, salt), n, dt); break;
		}
	}
	for (unsigned r = c[1].r0; r < c[1].r1; r++) {
		EXPECT(memcmp(full[0][r], full[1][r], (n + extra) * es) == 0, "%s, N=%u, n=%zu, %s: rank %u's buffer differs",
		       op_names[op], N, n, dt == ZS_F16 ? "fp16" : "fp32", r);
		if (op == OP_RS)
			EXPECT(memcmp(shard[0][r], shard[1][r], s * es) == 0, "%s, N=%u, n=%zu: rank %u's shard differs",
			       op_names[op], N, n, r);
	}

	/* Bytes handed to MPI by each local rank, from the definition of each
	 * call: its slots of the other processes' ranks (reduce-scatter), its
	 * own slots once per other process (all-gather). */
	unsigned L = N / (unsigned)nproc;
	enum zs_coll_kind kind = op == OP_AR                 ? ZS_ALL_REDUCE
	                         : op <= OP_RS_IN_PLACE      ? ZS_REDUCE_SCATTER
	                         : op == OP_BC               ? ZS_BROADCAST
	                                                     : ZS_ALL_GATHER;
	for (unsigned r = c[1].r0; r < c[1].r1; r++) {
		unsigned long long want = 0;
		if (op == OP_BC) /* the root's buffer, once for each other process */
			want = r == root_of(N, salt) ? n * es * (unsigned)(nproc - 1) : 0;
		else if (op != OP_AG && op != OP_AG_IN_PLACE)
			for (unsigned j = 0; j < N; j++)
				if (j / L != (unsigned)me)
					want += coll_owned(n, s, j) * es;
		if (op != OP_RS && op != OP_RS_IN_PLACE && op != OP_BC)
			want += coll_owned(n, s, r) * es * (unsigned)(nproc - 1);
		const struct zs_coll_stats *st = &c[1].stats[r];
		EXPECT(st->wire_bytes[kind] == want, "%s, N=%u, n=%zu: rank %u handed %llu bytes to MPI, not %llu",
		       op_names[op], N, n, r, st->wire_bytes[kind], want);
		EXPECT((st->wire_calls[kind] > 0) == (nproc > 1), "%s: %llu MPI calls at P=%d", op_names[op],
		       st->wire_calls[kind], nproc);
		/* One rank per process, no padding: the ring's bytes exactly. */
		if ((unsigned)nproc == N && n % N == 0 && op != OP_BC)
			EXPECT(st->wire_bytes[kind] == c[1].stats[r].bytes[kind],
			       "%s, N=%u, n=%zu: %llu bytes to MPI, the ring sends %llu", op_names[op], N, n,
			       st->wire_bytes[kind], c[1].stats[r].bytes[kind]);
	}

	for (int b = 0; b < 2; b++) {
		for (unsigned r = 0; r < N; r++) {
			if (op != OP_RS_IN_PLACE && op != OP_AG_IN_PLACE)
				free(shard[b][r]);
			free(full[b][r]);
		}
		free(full[b]);
		free(shard[b]);
		coll_destroy(&c[b]);
	}
	free(cause);
}

static void sweep(enum op op)
{
	for (unsigned m = 1; m <= 3; m++) {
		unsigned N = m * (unsigned)nproc;
		/* one element; fewer than N (ranks with padding only); one more
		 * than N; blocks and their tails; the default model's Ψ */
		const size_t sizes[] = {1, N > 1 ? N - 1 : 2, N + 1, 256, 1000, 33088};
		for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
			for (int d = 0; d < 2; d++)
				check_one(op, N, sizes[i], d ? ZS_F32 : ZS_F16, i * 7 + m, COLL_MPI_STAGE);
		/* Through staging in many chunks, the last one partial. */
		check_one(op, N, 33088, ZS_F16, 5, 4000);
		check_one(op, N, 1000, ZS_F32, 6, 1);
	}
	settle();
}

START_TEST(test_mpi_all_reduce_is_bitwise_the_in_process_one) { sweep(OP_AR); }
END_TEST
START_TEST(test_mpi_reduce_scatter_is_bitwise_the_in_process_one) { sweep(OP_RS); }
END_TEST
START_TEST(test_mpi_reduce_scatter_in_place_is_bitwise_the_in_process_one) { sweep(OP_RS_IN_PLACE); }
END_TEST
START_TEST(test_mpi_all_gather_is_bitwise_the_in_process_one) { sweep(OP_AG); }
END_TEST
START_TEST(test_mpi_all_gather_in_place_is_bitwise_the_in_process_one) { sweep(OP_AG_IN_PLACE); }
END_TEST

START_TEST(test_mpi_broadcast_is_bitwise_the_in_process_one) { sweep(OP_BC); }
END_TEST

START_TEST(test_mpi_refuses_a_world_the_processes_do_not_divide)
{
	struct zs_coll c;
	char *cause = NULL;
	if (nproc > 1) {
		ck_assert_int_eq(coll_init_mpi(&c, (unsigned)nproc + 1, &cause), -1);
		ck_assert_ptr_nonnull(strstr(cause, "cannot be split evenly"));
		free(cause);
	}
}
END_TEST

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &nproc);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	Suite *s = suite_create("coll_mpi");
	TCase *t = tcase_create("coll_mpi");
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_mpi_all_reduce_is_bitwise_the_in_process_one);
	tcase_add_test(t, test_mpi_reduce_scatter_is_bitwise_the_in_process_one);
	tcase_add_test(t, test_mpi_reduce_scatter_in_place_is_bitwise_the_in_process_one);
	tcase_add_test(t, test_mpi_all_gather_is_bitwise_the_in_process_one);
	tcase_add_test(t, test_mpi_all_gather_in_place_is_bitwise_the_in_process_one);
	tcase_add_test(t, test_mpi_broadcast_is_bitwise_the_in_process_one);
	tcase_add_test(t, test_mpi_refuses_a_world_the_processes_do_not_divide);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	/* Forked tests would each need MPI of their own. */
	srunner_set_fork_status(sr, CK_NOFORK);
	if (me != 0)
		srunner_set_log(sr, "/dev/null");
	srunner_run_all(sr, me == 0 ? CK_NORMAL : CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	MPI_Finalize();
	return failed == 0 ? 0 : 1;
}
