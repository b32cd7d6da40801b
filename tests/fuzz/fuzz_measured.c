/*
 * fuzz_measured — libFuzzer harness for the report's reader of
 * measured.json (zerosim-measured/1, report_data_from_json), against a
 * fixed valid theory.json of the same model. See fuzz_report.h.
 */
#include "config.h"

#define FUZZ_SETUP
#include "fuzz_report.h"

static void fuzz_setup(void) { fuzz_report_init(REPORT_THEORY_FORMAT); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_report_one(data, size, REPORT_MEASURED_FORMAT, 1);
	return 0;
}
