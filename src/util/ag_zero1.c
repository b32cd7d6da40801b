/*
 * ag_zero1 — ZeroRedundancyOptimizer's partition (util/ag_zero1.h).
 */
#include "util/ag_zero1.h"

#include <stdlib.h>

#include "util/util.h"

void ag_zero1_partition(const uint64_t *numel, size_t n, unsigned world, unsigned *rank_of, size_t *order)
{
	/* sorted(params, key=numel, reverse=True): a stable insertion sort
	 * (ties keep model order, as Python's sort does) */
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		while (j > 0 && numel[order[j - 1]] < numel[i]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	/* each to the first rank of the smallest load so far */
	uint64_t *load = zs_calloc(world ? world : 1, sizeof *load);
	for (size_t k = 0; k < n; k++) {
		unsigned r = 0;
		for (unsigned q = 1; q < world; q++)
			if (load[q] < load[r])
				r = q;
		rank_of[order[k]] = r;
		load[r] += numel[order[k]];
	}
	free(load);
}
