/*
 * test_golden — pins the engine's arithmetic. For fixed MLP runs (mixed
 * and fp32, Adam and SGD, N = 1, 3, 4) the digest of the final fp32
 * weights and the final loss must be exactly the values below, for every
 * scheme and unit (the four schemes are bitwise equal by design, so one
 * golden per configuration).
 *
 * Other tests check that the arithmetic is right (finite differences, a
 * hand-worked Adam step); these check that it has not changed. A new
 * summation order in a kernel, a build with -mfma -ffp-contract=fast, or a
 * different generator changes every digest here. When a change of the
 * arithmetic is deliberate, update the table in the same commit and say
 * why in its message: print the new values with ZS_GOLDEN_PRINT=1.
 *
 * The values were taken from the engine at the commit that added this file,
 * whose arithmetic the other tests had checked. They hold on any x86-64 or
 * other IEEE 754 machine: the kernels are the project's own code, built
 * with -ffp-contract=off, and the fp16 conversion is exact either way.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/config.h"
#include "util/util.h"

struct golden {
	const char *layers;
	const char *precision, *optimizer;
	unsigned world;
	uint64_t digest; /* XXH3-64 of the final fp32 weights */
	float loss;      /* the last step's loss, exact (a hexadecimal literal) */
};

/* --batch 5 --steps 4 --seed 3 --lr 0.001: odd widths and a batch that is
 * not a multiple of the kernels' blocks exercise their tails; 64,256,64 is
 * the default model, whose rows fill whole vector blocks. */
static const struct golden goldens[] = {
	{"9,33,17,5", "mixed", "adam", 1, 0xa30a8f8d379dc355u, 0x1.7a6eaep-4f},
	{"9,33,17,5", "mixed", "adam", 3, 0xf04cc6d51779238du, 0x1.6c9c4cp-4f},
	{"9,33,17,5", "mixed", "adam", 4, 0x7403b2ed5ed0ddd9u, 0x1.63f604p-4f},
	{"64,256,64", "mixed", "adam", 1, 0x000088524f7a12a9u, 0x1.c610dcp-4f},
	{"64,256,64", "mixed", "adam", 3, 0xac88fbc79b440bf7u, 0x1.9ab5f4p-4f},
	{"64,256,64", "mixed", "adam", 4, 0x2ea26a5b2b8e4d88u, 0x1.909b62p-4f},
	{"9,33,17,5", "mixed", "sgd", 1, 0x0560358d5ce74796u, 0x1.7d9328p-4f},
	{"9,33,17,5", "mixed", "sgd", 3, 0xaec9c0676c6a5115u, 0x1.758d0cp-4f},
	{"9,33,17,5", "mixed", "sgd", 4, 0x4d5d158d65e3c991u, 0x1.6cd05ep-4f},
	{"64,256,64", "mixed", "sgd", 1, 0xf755dab6a553b026u, 0x1.d87346p-4f},
	{"64,256,64", "mixed", "sgd", 3, 0x909358d995ecd74bu, 0x1.bab9a2p-4f},
	{"64,256,64", "mixed", "sgd", 4, 0x95f215967519712du, 0x1.b22130p-4f},
	{"9,33,17,5", "fp32", "adam", 1, 0x1fa3fc95075e48d7u, 0x1.7a6d24p-4f},
	{"9,33,17,5", "fp32", "adam", 3, 0x2dffaae3b4e208e7u, 0x1.6c9928p-4f},
	{"9,33,17,5", "fp32", "adam", 4, 0xbd7821a5f5df8087u, 0x1.63f942p-4f},
	{"64,256,64", "fp32", "adam", 1, 0x9025c18afe85d3bbu, 0x1.c6133cp-4f},
	{"64,256,64", "fp32", "adam", 3, 0x8c3c5688c19f8ff1u, 0x1.9ab648p-4f},
	{"64,256,64", "fp32", "adam", 4, 0x9ffe8e47f0cd63a1u, 0x1.90993cp-4f},
	{"9,33,17,5", "fp32", "sgd", 1, 0x143f73d624c8bfaau, 0x1.7d98fep-4f},
	{"9,33,17,5", "fp32", "sgd", 3, 0x83466cd9e2ecfb56u, 0x1.758aa4p-4f},
	{"9,33,17,5", "fp32", "sgd", 4, 0xe9eedfcd007f395au, 0x1.6cd0e0p-4f},
	{"64,256,64", "fp32", "sgd", 1, 0x6ab413a54bd3854eu, 0x1.d87106p-4f},
	{"64,256,64", "fp32", "sgd", 3, 0x1c384cb056379aacu, 0x1.bab9b4p-4f},
	{"64,256,64", "fp32", "sgd", 4, 0x511a8c03859718e2u, 0x1.b2217ep-4f},
};
#define NGOLDENS (sizeof goldens / sizeof goldens[0])

static void set(struct zs_config *c, const char *key, const char *value)
{
	char *cause = NULL;
	ck_assert_msg(zs_config_set(c, key, value, &cause) == 0, "--%s %s: %s", key, value,
	              cause ? cause : "?");
}

START_TEST(test_final_weights_and_loss_match_the_goldens)
{
	const struct golden *g = &goldens[_i];
	struct zs_config c;
	zs_config_defaults(&c);
	set(&c, "layers", g->layers);
	set(&c, "precision", g->precision);
	set(&c, "optimizer", g->optimizer);
	set(&c, "batch", "5");
	set(&c, "steps", "4");
	set(&c, "seed", "3");
	set(&c, "lr", "0.001");
	int print = getenv("ZS_GOLDEN_PRINT") != NULL;
	for (int s = 0; s < ZS_NSCHEMES; s++)
		for (int u = 0; u < ZS_NUNITS; u++) {
			struct zs_run_options opt = {0};
			struct zs_result res;
			char *cause = NULL;
			int r = engine_run(&c, (enum zs_scheme)s, g->world, (enum zs_unit)u, NULL, &opt, &res,
			                   &cause);
			ck_assert_msg(r == 0, "engine_run: %s", cause ? cause : "?");
			float loss = res.losses[c.steps - 1];
			uint64_t digest = res.digest;
			engine_result_free(&res);
			if (print && s == 0 && u == 0)
				printf("{\"%s\", \"%s\", \"%s\", %u, 0x%016" PRIx64 "u, %af},\n", g->layers,
				       g->precision, g->optimizer, g->world, digest, (double)loss), fflush(stdout);
			ck_assert_msg(digest == g->digest && memcmp(&loss, &g->loss, sizeof loss) == 0,
			              "--layers %s --precision %s --optimizer %s --world %u, %s, unit %s: "
			              "digest %016" PRIx64 " loss %a, golden %016" PRIx64 " loss %a",
			              g->layers, g->precision, g->optimizer, g->world,
			              zs_scheme_name((enum zs_scheme)s), zs_unit_name((enum zs_unit)u), digest,
			              (double)loss, g->digest, (double)g->loss);
		}
}
END_TEST

static Suite *golden_suite(void)
{
	Suite *s = suite_create("golden");
	TCase *t = tcase_create("arithmetic");
	tcase_set_timeout(t, 120);
	tcase_add_loop_test(t, test_final_weights_and_loss_match_the_goldens, 0, (int)NGOLDENS);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	SRunner *sr = srunner_create(golden_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
