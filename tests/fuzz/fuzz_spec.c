/*
 * fuzz_spec — libFuzzer harness for the sweep-spec reader
 * (zs_config_load_spec, docs/formats.md "zerosim-sweep/2"). A spec that
 * loads must give a configuration the command line would accept; one that
 * does not must leave the configuration untouched and say why in one line.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "util/config.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zs_config c, before;
	char *cause = NULL;

	zs_config_defaults(&c);
	memcpy(&before, &c, sizeof c);
	if (zs_config_load_spec(&c, fuzz_file(data, size), &cause) == 0) {
		if (cause != NULL)
			abort();
		if (c.nwidths < 2 || c.nwidths > ZS_MAX_WIDTHS || c.nworld < 1 || c.nworld > ZS_MAX_WORLDS ||
		    c.nschemes < 1 || c.nschemes > ZS_NSCHEMES || c.nunits < 1 || c.nunits > ZS_NUNITS ||
		    c.steps < 1 || c.batch < 1 || !(c.lr > 0))
			abort(); /* the spec got around a limit of the options */
		for (size_t i = 0; i < c.nworld; i++)
			if (c.world[i] < 1 || c.world[i] > ZS_MAX_WORLD)
				abort();
		for (size_t i = 0; i < c.nwidths; i++)
			if (c.widths[i] < 1 || c.widths[i] > ZS_MAX_WIDTH)
				abort();
		(void)zs_config_validate(&c, &cause);
	} else {
		if (cause == NULL || strlen(cause) == 0 || strchr(cause, '\n') != NULL)
			abort();
		if (memcmp(&c, &before, sizeof c) != 0)
			abort(); /* a refused spec changed the configuration */
	}
	free(cause);
	return 0;
}
