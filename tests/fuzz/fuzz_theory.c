/*
 * fuzz_theory — libFuzzer harness for the report's reader of theory.json
 * (zerosim-theory/1, report_data_from_json), against a fixed valid
 * measured.json of the same model. See fuzz_report.h.
 */
#include "config.h"

#include "fuzz_report.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	zs_json_init(); /* cJSON's allocations through zs_malloc, as zerosim's */
	fuzz_report_init(REPORT_MEASURED_FORMAT);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_report_one(data, size, REPORT_THEORY_FORMAT, 0);
	return 0;
}
