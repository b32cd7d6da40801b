/*
 * bench_time — the clock and the median the benchmarks share.
 */
#ifndef ZS_BENCH_TIME_H
#define ZS_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of v (n >= 1 values; sorts v). */
static inline double bench_median(double *v, size_t n)
{
	qsort(v, n, sizeof *v, bench_cmp);
	return v[n / 2];
}

#endif
