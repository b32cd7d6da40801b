/*
 * test_nccl — NCCL's bytes per communicator (theory_nccl.h) worked by hand
 * from NCCL v2.21.5's sizes, written out as numbers here (not through the
 * header's macros, so that a wrong macro fails): Simple's NCCL_BUFFSIZE
 * 4,194,304 (init.cc 544); LL 8 × 512 × 8 × 16 = 524,288 (init.cc 542);
 * LL128 120 × 640 × 8 × 8 = 4,915,200 (init.cc 543); ncclSendMem and
 * ncclRecvMem 4,096 each (comm.h 39-63); each connection's buffer rounded up
 * to CUDA_IPC_MIN 2,097,152 (comm.h 32, p2p.cc 357 and 422); three device
 * structures per channel (channel.cc 41, 44, 55) for the channels rounded up
 * to a power of two (paths.cc 764, 767) and the device comm (init.cc 402),
 * a 2 MiB cuMem granule each (alloc.h 100-101).
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "theory/theory_nccl.h"
#include "util/config.h"

/* A send connection: 4,096 B rounded up to 2 MiB. A receive connection:
 * 4,096 + 524,288 + 4,915,200 + 4,194,304 = 9,637,888 B, rounded up to
 * five 2 MiB units, 10,485,760 B. */
#define SEND 2097152ull
#define RECV 10485760ull
#define GRANULE 2097152ull

START_TEST(test_two_ranks_at_8_channels_hold_one_send_and_one_recv_a_channel)
{
	struct theory_nccl n;
	/* 8 × (2,097,152 + 10,485,760) = 100,663,296 B of buffers;
	 * (3 × 8 + 1) × 2,097,152 = 52,428,800 B of structures. */
	uint64_t b = theory_nccl_comm_bytes(2, 8, 4194304, &n);
	ck_assert_uint_eq(n.sends, 1);
	ck_assert_uint_eq(n.recvs, 1);
	ck_assert_uint_eq(n.send_bytes, SEND);
	ck_assert_uint_eq(n.recv_bytes, RECV);
	ck_assert_uint_eq(n.buffers, 100663296ull);
	ck_assert_uint_eq(n.structures, 52428800ull);
	ck_assert_uint_eq(b, 153092096ull);
	ck_assert_uint_eq(n.bytes, b);
}
END_TEST

START_TEST(test_eight_ranks_at_8_channels_hold_two_sends_and_two_recvs_a_channel)
{
	struct theory_nccl n;
	/* 8 × 2 × (2,097,152 + 10,485,760) = 201,326,592 B + 52,428,800 B. */
	ck_assert_uint_eq(theory_nccl_comm_bytes(8, 8, 4194304, &n), 253755392ull);
	ck_assert_uint_eq(n.sends, 2);
	ck_assert_uint_eq(n.recvs, 2);
	ck_assert_uint_eq(n.buffers, 201326592ull);
	/* Three ranks: the middle one of the chain, the same. */
	ck_assert_uint_eq(theory_nccl_comm_bytes(3, 8, 4194304, &n), 253755392ull);
}
END_TEST

START_TEST(test_one_rank_has_no_peer_and_holds_nothing)
{
	struct theory_nccl n;
	ck_assert_uint_eq(theory_nccl_comm_bytes(1, 8, 4194304, &n), 0);
	ck_assert_uint_eq(n.buffers + n.structures, 0);
}
END_TEST

START_TEST(test_24_channels_give_structures_to_32)
{
	struct theory_nccl n;
	/* 24 × 12,582,912 = 301,989,888 B; (3 × 32 + 1) × 2 MiB = 203,423,744 B. */
	ck_assert_uint_eq(theory_nccl_comm_bytes(2, 24, 4194304, &n), 505413632ull);
	ck_assert_uint_eq(n.struct_channels, 32);
	ck_assert_uint_eq(n.structures, 203423744ull);
	/* MAXCHANNELS, 32: 32 × 12,582,912 + 203,423,744. */
	ck_assert_uint_eq(theory_nccl_comm_bytes(2, 32, 4194304, &n), 606076928ull);
}
END_TEST

START_TEST(test_nccl_buffsize_moves_the_receive_buffer_in_2_mib_steps)
{
	struct theory_nccl n;
	/* 1 MiB: 4,096 + 524,288 + 4,915,200 + 1,048,576 = 6,492,160 B, four
	 * 2 MiB units = 8,388,608 B. */
	theory_nccl_comm_bytes(2, 1, 1048576, &n);
	ck_assert_uint_eq(n.recv_bytes, 8388608ull);
	/* The largest Simple buffer within five units: 10,485,760 - 4,096 -
	 * 524,288 - 4,915,200 = 5,042,176 B; one byte more takes six. */
	theory_nccl_comm_bytes(2, 1, 5042176, &n);
	ck_assert_uint_eq(n.recv_bytes, 10485760ull);
	theory_nccl_comm_bytes(2, 1, 5042177, &n);
	ck_assert_uint_eq(n.recv_bytes, 12582912ull);
	/* The sender's never moves (no P2P read: see theory_nccl.c). */
	ck_assert_uint_eq(n.send_bytes, SEND);
}
END_TEST

START_TEST(test_communicators_per_framework)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.framework = ZS_FW_TORCH;
	for (int s = 0; s < ZS_NSCHEMES; s++) {
		ck_assert_uint_eq(theory_nccl_communicators(&c, (enum zs_scheme)s, 8), 1);
		ck_assert_uint_eq(theory_nccl_communicators(&c, (enum zs_scheme)s, 1), 0);
	}
	c.framework = ZS_FW_DEEPSPEED;
	ck_assert_uint_eq(theory_nccl_communicators(&c, ZS_ZERO1, 4), 1);
	ck_assert_uint_eq(theory_nccl_communicators(&c, ZS_ZERO2, 4), 1);
	/* The clone of the world group and, for ZeRO-3's barriers, the
	 * default group. */
	ck_assert_uint_eq(theory_nccl_communicators(&c, ZS_ZERO3, 4), 2);
	c.framework = ZS_FW_PAPER;
	ck_assert_uint_eq(theory_nccl_communicators(&c, ZS_ZERO3, 4), 1);
}
END_TEST

static Suite *nccl_suite(void)
{
	Suite *s = suite_create("nccl");
	TCase *t = tcase_create("buffers");
	tcase_add_test(t, test_two_ranks_at_8_channels_hold_one_send_and_one_recv_a_channel);
	tcase_add_test(t, test_eight_ranks_at_8_channels_hold_two_sends_and_two_recvs_a_channel);
	tcase_add_test(t, test_one_rank_has_no_peer_and_holds_nothing);
	tcase_add_test(t, test_24_channels_give_structures_to_32);
	tcase_add_test(t, test_nccl_buffsize_moves_the_receive_buffer_in_2_mib_steps);
	tcase_add_test(t, test_communicators_per_framework);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(nccl_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
