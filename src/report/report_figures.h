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
 * (without such runs its files are removed, so that a reused folder shows
 * no stale figure; the template includes it if its PDF exists).
 */
#ifndef ZS_REPORT_FIGURES_H
#define ZS_REPORT_FIGURES_H

#include "report/report_data.h"
#include "report/report_tfm.h"

#define REPORT_NFIGURES 5
extern const char *const report_figure_names[REPORT_NFIGURES];
#define REPORT_FIGURE_RANKS "fig6-ranks"

/* Write every .gp and .dat into `dir` (which exists). Returns 0 or -1
 * with *cause set. */
int report_figures_write(const struct report_data *d, const char *dir, char **cause);

/* fig7-transformer's .gp and .dat (report_tfm.h) into `dir`. */
int report_figures_tfm(const struct report_tfm *t, const char *dir, char **cause);

#endif
