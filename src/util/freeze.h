/*
 * freeze — --freeze SPEC: which parameters a fine-tuning run leaves out of
 * training (requires_grad False), by their Hugging Face names
 * (docs/finetune.md; the same syntax as tests/ft_torch.py's --freeze).
 *
 * SPEC is a comma-separated list of terms; a parameter is frozen when any
 * term matches its name (transformer.h.0.attn.c_attn.weight,
 * model.layers.1.self_attn.q_proj.weight, lm_head.weight):
 *   embeddings        the token and position embeddings (wte, wpe,
 *                     embed_tokens; a tied head is the same tensor)
 *   blocks:A-B        blocks A..B, 0-based, inclusive (A <= B)
 *   all-but-last:N    the embeddings and every block but the last N
 *   re:REGEX          a POSIX extended regular expression found anywhere
 *                     in the name (regexec; the reference uses Python's
 *                     re.search: write what both read alike)
 *   anything else     a glob over the whole name (fnmatch(3) without
 *                     flags: `*` crosses dots, as Python's fnmatchcase)
 * Empty terms are skipped. Ownership: nothing is kept between calls.
 */
#ifndef ZS_UTIL_FREEZE_H
#define ZS_UTIL_FREEZE_H

#include <stddef.h>
#include <stdint.h>

struct step_params; /* util/step.h (which config.h's users need not include) */

/* The longest SPEC (zs_config holds it in a fixed array). */
#define ZS_FREEZE_MAX 512

/* 0 when every term of spec parses (blocks:A-B, all-but-last:N, a
 * compilable re:), else -1 with *cause ("--freeze: bad term ..."). */
int zs_freeze_check(const char *spec, char **cause);

/* Whether the parameter named `name` is frozen by spec in a model of
 * `blocks` blocks. spec must have passed zs_freeze_check. */
int zs_freeze_match(const char *spec, const char *name, uint64_t blocks);

/* The paper's schedule (docs/schedule.md, "Frozen parameters under the
 * paper's schedule"): the trainable elements of each of its units
 * (by_layer 0, unit=model: the flat vector; 1, unit=layer: each layer
 * of p with tensors), [off, off + n) of the flat vector, one run a unit. Returns
 * the units' runs (*nunits of them; the caller frees them), or NULL with
 * *cause ("--freeze ...: ...") where a unit's trainable tensors are not
 * one run, where zero3 (`whole`) would mix frozen and trainable in a unit,
 * or where a fused tensor's parts are not all frozen or all trainable.
 * An empty spec freezes nothing (n = the unit's elements). */
struct zs_freeze_run {
	uint64_t off, n;
	uint64_t size;      /* the unit's elements, frozen ones too */
};
struct zs_freeze_run *zs_freeze_units(const struct step_params *p, const char *spec, int by_layer, int whole,
                                      size_t *nunits, char **cause);

/* --freeze under c's --framework paper (nothing to check under another,
 * or without --freeze): 0 where every unit mode of c can lay it out
 * (zs_freeze_units; zero3 at N > 1 among c's), or -1 with *cause, also
 * where m is NULL (the MLP) or the pattern freezes none or every one of
 * m's tensors. */
struct zs_config;
struct zs_model;
int zs_freeze_paper_check(const struct zs_config *c, const struct zs_model *m, char **cause);

/* Whether spec freezes tensor i of p (every part of a fused tensor). */
int zs_freeze_tensor(const struct step_params *p, const char *spec, size_t i);

#endif
