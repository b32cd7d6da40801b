/*
 * test_rss — the tracker sees every byte. Runs `zerosim measure` on a model
 * large enough that untracked memory would show (1024,4096,1024, Ψ = 8.4M,
 * N = 16, one step), one scheme per process, and compares each process's
 * peak RSS, as the kernel reports it for the child (getrusage), with the
 * tracked bytes in its JSON: within 10% of the summed per-rank peak (above
 * it, plus 16 MB for code and libraries; below it), and not below the
 * summed resident state.
 * Then the same for a transformer, GPT-2 small (124M parameters, seq 128,
 * N = 2, dp and zero3 by layer; and seq 256, N = 1 as the plain PyTorch
 * loop, --wrapper none), skipped with a line saying so where the machine has
 * less than 8 GB available.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

/* One run in its own process (`zerosim measure ARGS... --out FILE`): that
 * process's peak RSS against the run's summed per-rank tracked peak and
 * resident bytes. */
static void check_run(const char *what, const char *const *args)
{
	char out[] = "/tmp/zerosim-rss-XXXXXX";
	int fd = mkstemp(out);
	ck_assert_int_ge(fd, 0);
	close(fd);
	const char *argv[40] = {"zerosim", "measure", "--quiet", "--out", out};
	size_t n = 5;
	for (size_t i = 0; args[i] != NULL && n + 1 < sizeof argv / sizeof *argv; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execv("./zerosim", (char *const *)(size_t)argv);
		_exit(127);
	}
	int status;
	struct rusage ru;
	ck_assert_int_eq(wait4(pid, &status, 0, &ru), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "zerosim measure (%s) failed", what);

	cJSON *root;
	char *cause = NULL;
	ck_assert_msg(zs_json_load(out, "zerosim-measured/1", &root, &cause) == 0, "%s", cause);
	const cJSON *run = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "runs"), 0), *v;
	const cJSON *per = cJSON_GetObjectItem(run, "per_rank");
	double peak = 0, resident = 0;
	cJSON_ArrayForEach(v, cJSON_GetObjectItem(per, "peak_bytes")) peak += v->valuedouble;
	cJSON_ArrayForEach(v, cJSON_GetObjectItem(per, "resident_bytes")) resident += v->valuedouble;
	cJSON_Delete(root);
	unlink(out);
	double rss = (double)ru.ru_maxrss * 1024.0;
	printf("%-12s peak RSS %7.1f MB, summed tracked peak %7.1f MB, summed resident %7.1f MB\n", what, rss / 1e6,
	       peak / 1e6, resident / 1e6);
	ck_assert_double_gt(resident, 0);
	ck_assert_msg(rss <= 1.10 * peak + 16e6, "%s: RSS %.0f is more than 10%% above the tracked %.0f", what, rss,
	              peak);
	/* Below too: a tracker that counted bytes the run never held (a block
	 * counted twice, or not released from the count when freed) would
	 * put the tracked peak above what the process ever had. */
	ck_assert_msg(rss >= 0.90 * peak, "%s: RSS %.0f is more than 10%% below the tracked %.0f", what, rss, peak);
	ck_assert_msg(rss >= resident, "%s: RSS %.0f is below the summed resident %.0f", what, rss, resident);
}

static void check_scheme(const char *scheme)
{
	const char *const args[] = {"--layers", "1024,4096,1024", "--world", "16", "--steps", "1", "--schemes", scheme,
	                            NULL};
	check_run(scheme, args);
}

/* MemAvailable in bytes, or 0 if unknown. */
static double available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	double kb = 0;
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return kb * 1024.0;
}

START_TEST(test_peak_rss_matches_the_tracked_bytes_of_gpt2_small)
{
	if (available() < 8e9) {
		printf("SKIP gpt2: %.1f GB available, the gpt2-small runs want 8 GB\n", available() / 1e9);
		return;
	}
	static const char *const schemes[] = {"dp", "zero3"};
	for (size_t i = 0; i < 2; i++) {
		const char *const args[] = {"--model", "gpt2", "--seq", "128", "--batch", "1", "--world", "2", "--unit",
		                            "layer", "--steps", "1", "--schemes", schemes[i], NULL};
		char what[32];
		snprintf(what, sizeof what, "gpt2 %s", schemes[i]);
		check_run(what, args);
	}
	/* The plain loop (--wrapper none): the PyTorch step's executor
	 * (engine/ag_exec.c), whose kernels may allocate nothing of their own.
	 * Seq 256, the case: at seq 128 its many sizes of temporaries
	 * leave the heap 9.5% above the tracked peak (fragmentation in the
	 * one arena heap.c keeps), close to the bound; at 256 it is 5%. */
	const char *const plain[] = {"--model", "gpt2", "--seq", "256", "--batch", "1", "--world", "1", "--steps", "1",
	                             "--precision", "fp32", "--framework", "torch", "--wrapper", "none", "--torch-version",
	                             "1.13", "--torch-device", "cpu", "--optimizer-impl", "single", "--zero-grad", "zeros",
	                             "--attn", "eager", "--schemes", "dp", NULL};
	check_run("gpt2 plain", plain);
}
END_TEST

START_TEST(test_peak_rss_matches_the_tracked_bytes_in_every_scheme)
{
	static const char *const schemes[] = {"dp", "zero1", "zero2", "zero3"};
	for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++)
		check_scheme(schemes[i]);
}
END_TEST

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
#ifdef ZS_SANITIZERS
	puts("SKIP: the sanitizers' shadow memory inflates RSS");
	return 77;
#endif
	const char *srcdir = getenv("srcdir"); /* the shipped model configs */
	if (getenv("ZEROSIM_DATADIR") == NULL)
		setenv("ZEROSIM_DATADIR", srcdir != NULL ? srcdir : ".", 1);
	Suite *s = suite_create("rss");
	TCase *t = tcase_create("rss");
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_peak_rss_matches_the_tracked_bytes_in_every_scheme);
	tcase_add_test(t, test_peak_rss_matches_the_tracked_bytes_of_gpt2_small);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
