/*
 * report_findings — the claims of the ZeRO story (docs/design.md, "The report"),
 * each checked against the measured numbers, never written as fixed prose:
 * a changed engine or option turns a finding false instead of leaving a
 * stale sentence. A claim whose runs are not in the files is "not tested
 * by this sweep".
 */
#ifndef ZS_REPORT_FINDINGS_H
#define ZS_REPORT_FINDINGS_H

#include "report/report_data.h"

enum report_verdict { REPORT_UNTESTED, REPORT_HOLDS, REPORT_FAILS };

enum report_finding_id {
	REPORT_F_DP_FLAT,           /* DP's column never moves */
	REPORT_F_ZERO12_FLATTEN,    /* ZeRO-1/2 flatten toward p+g and p, never below */
	REPORT_F_ZERO3_HALVES,      /* ZeRO-3 resident halves per doubling (N divides evenly) */
	REPORT_F_N1_IDENTICAL,      /* at N = 1 all four schemes are identical */
	REPORT_F_ZERO3_PEAK_SLOW,   /* ZeRO-3 peak falls much more slowly than its resident */
	REPORT_F_ZERO3_PEAK_WORSE,  /* unit=model: ZeRO-3 peak at largest N > ZeRO-2 resident */
	REPORT_F_LAYER_GATHER,      /* unit=layer: the gather adds only the largest unit */
	REPORT_F_COMM_RATIO,        /* ZeRO-3 comm is 1.5x DP's */
	REPORT_F_TORCH_ZERO1_FLAT,  /* torch's zero1: no better from N = 3 on (default MLP) */
	REPORT_F_TORCH_ZERO1_COMM,  /* torch's zero1 sends 1.5x the paper's zero1 */
	REPORT_F_DS_ZERO3_PERSIST,  /* DeepSpeed's zero3 partitions none of the model */
	REPORT_NFINDINGS
};

struct report_finding {
	const char *key;            /* short identifier, for diff.json */
	const char *claim;          /* the claim, plain text */
	enum report_verdict verdict;
	char *evidence;             /* the numbers, plain text; owned */
	int shown;                  /* a framework's claim is shown only for its files */
};

/* Check every claim; f has REPORT_NFINDINGS slots. The caller frees the
 * evidence strings with report_findings_free(). */
void report_findings(const struct report_data *d, struct report_finding *f);
void report_findings_free(struct report_finding *f);

/* "holds", "does not hold", "not tested by this sweep". */
const char *report_verdict_name(enum report_verdict v);

#endif
