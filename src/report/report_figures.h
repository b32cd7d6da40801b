/*
 * report_figures — the five figures, each a standalone gnuplot script
 * (`NAME.gp`) that reads its data (`NAME.dat`) and writes `NAME.pdf`
 * (pdfcairo) and `NAME.png` (pngcairo) when run in its folder, so a user can
 * edit the script and rerun `gnuplot NAME.gp`:
 *
 *   fig1-resident   resident bytes/param vs N, measured over the floors
 *   fig2-peak       peak bytes/param vs N, with ZeRO-2's resident line
 *   fig3-comm       bytes sent per rank per step vs N
 *   fig4-breakdown  the peak by category at the largest N, stacked
 *   fig5-timeline   rank 0's bytes through the last step, per scheme
 *
 * and, only when some run's ranks hold unequal bytes (torch's zero1),
 *
 *   fig6-ranks      every rank's resident bytes/param, over the floor
 *
 * and, only when the measurement was offloaded (--offload),
 *
 *   fig8-host       host bytes per rank at the peak vs N: the schedule's
 *                   line, every rank's measurement a point on it
 *
 * (without such runs their files are removed, so that a reused folder
 * shows no stale figure; flags.tex and the template include each if its
 * PDF exists). The transformer section's figures are fig7-transformer and
 * fig9-host-transformer (fig8's kind, a panel per offloaded model); the
 * section "zerosim against PyTorch" (report_torch.h) has fig11-torch.
 */
#ifndef ZS_REPORT_FIGURES_H
#define ZS_REPORT_FIGURES_H

#include "report/report_data.h"
#include "report/report_tfm_data.h"
#include "report/report_torch.h"

#define REPORT_NFIGURES 5
extern const char *const report_figure_names[REPORT_NFIGURES];
#define REPORT_FIGURE_RANKS "fig6-ranks"
#define REPORT_FIGURE_HOST "fig8-host"
#define REPORT_FIGURE_TFM "fig7-transformer"
#define REPORT_FIGURE_TFM_HOST "fig9-host-transformer"
#define REPORT_FIGURE_ALLOC "fig10-allocator"

/* The figures written only when their data exist, after the five. */
#define REPORT_NOPTIONAL 7
extern const char *const report_figure_optional[REPORT_NOPTIONAL];

/* Write every .gp and .dat into `dir` (which exists). Returns 0 or -1
 * with *cause set. */
int report_figures_write(const struct report_data *d, const char *dir, char **cause);

/* fig7-transformer's .gp and .dat (report_tfm_data.h) into `dir`. */
int report_figures_tfm(const struct report_tfm *t, const char *dir, char **cause);

/* fig11-torch's .gp and .dat (report_torch.h) into `dir`, or its files
 * removed when t holds no model. */
int report_figures_torch(const struct report_torch *t, const char *dir, char **cause);

/* A host figure's panel: offloaded runs of one model and unit. */
struct report_host_point {
	enum zs_scheme scheme;
	unsigned world;
	const struct report_host *host;
};
struct report_host_panel {
	char title[160];                     /* plain text: no quotes or backslashes */
	struct report_host_point *pt;
	size_t n;
};

/* Figure `name` (fig8-host, fig9-host-transformer) with a panel each (at
 * most 4), or its files removed when np is 0. */
int report_figures_host(const char *name, const struct report_host_panel *p, size_t np, const char *dir,
                        char **cause);

#endif
