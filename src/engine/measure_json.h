/*
 * measure_json — the measurement as zerosim-measured/1 (docs/formats.md),
 * and the --dump-weights file (zerosim-weights/1).
 *
 * Ownership: measure_json_new returns a tree the caller frees with
 * cJSON_Delete; measure_json_add_run copies what it needs from res.
 */
#ifndef ZS_MEASURE_JSON_H
#define ZS_MEASURE_JSON_H

#include <cjson/cJSON.h>

#include "engine/engine.h"
#include "util/config.h"

cJSON *measure_json_new(const struct zs_config *c, const char *case_path);
void measure_json_add_run(cJSON *root, const struct zs_config *c, const struct zs_result *res);
cJSON *measure_json_weights(const struct zs_config *c, const struct zs_result *res);

/* "xxh3:0123456789abcdef" into buf (at least 25 bytes). */
void measure_digest_string(char *buf, size_t n, unsigned long long digest);

#endif
