/*
 * report_tfm_data — see report_tfm_data.h.
 */
#include "config.h"

#include <stddef.h>

#include "report/report_tfm_data.h"

int report_tfm_measured(const struct report_tfm *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->models[i].measured_path != NULL)
			return 1;
	return 0;
}

const struct report_tfm_row *report_tfm_find(const struct report_tfm_model *m, enum zs_scheme s,
                                             unsigned world, enum zs_unit u)
{
	for (size_t i = 0; i < m->nrows; i++)
		if (m->rows[i].run.scheme == s && m->rows[i].run.world == world && m->rows[i].run.unit == u)
			return &m->rows[i];
	return NULL;
}

enum zs_unit report_tfm_unit(const struct report_tfm_model *m)
{
	for (size_t i = 0; i < m->nrows; i++)
		if (m->rows[i].run.unit == ZS_UNIT_LAYER)
			return ZS_UNIT_LAYER;
	return ZS_UNIT_MODEL;
}

unsigned report_tfm_world(const struct report_tfm_model *m)
{
	enum zs_unit u = report_tfm_unit(m);
	unsigned w = 0;

	for (size_t i = 0; i < m->nrows; i++)
		if (m->rows[i].run.unit == u && m->rows[i].run.world > w)
			w = m->rows[i].run.world;
	return w;
}
