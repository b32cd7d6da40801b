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
 * An empty SPEC or an empty term (`embeddings,`) is refused, never read as
 * no freeze. Ownership: nothing is kept between calls.
 */
#ifndef ZS_UTIL_FREEZE_H
#define ZS_UTIL_FREEZE_H

#include <stddef.h>
#include <stdint.h>

/* The longest SPEC (zs_config holds it in a fixed array). */
#define ZS_FREEZE_MAX 512

/* 0 when spec has terms and every one parses (blocks:A-B, all-but-last:N,
 * a compilable re:), else -1 with *cause ("--freeze: bad term ..."). */
int zs_freeze_check(const char *spec, char **cause);

/* Whether the parameter named `name` is frozen by spec in a model of
 * `blocks` blocks. spec must have passed zs_freeze_check. */
int zs_freeze_match(const char *spec, const char *name, uint64_t blocks);

/* The first term of spec (blanks trimmed) that matches none of the n
 * parameter names (a model of `blocks` blocks) into out (outn bytes;
 * ZS_FREEZE_MAX + 1 holds any): 1 when there is one, else 0 (out "").
 * A term that freezes nothing beside others that do is a typo or the
 * wrong model, never a no-op the user meant: the PyTorch step
 * (util/autograd.c) and the paper's with LoRA (util/lora.c) refuse it,
 * each naming the term. spec must have passed zs_freeze_check. */
int zs_freeze_unmatched(const char *spec, const char *const *names, size_t n, uint64_t blocks, char *out,
                        size_t outn);

#endif
