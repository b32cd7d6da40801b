/*
 * fuzz_theory — libFuzzer harness for the report's reader of theory.json
 * (zerosim-theory/1, report_data_from_json), against a fixed valid
 * measured.json of the same model. See fuzz_report.h.
 */
#include "config.h"

#define FUZZ_SETUP
#include "fuzz_report.h"

static void fuzz_setup(void) { fuzz_report_init(REPORT_MEASURED_FORMAT); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_report_one(data, size, REPORT_THEORY_FORMAT, 0);
	return 0;
}
