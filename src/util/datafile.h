/*
 * datafile — where zerosim finds the files it ships (the report's LaTeX
 * template, model configs). Each is named by its path in the source tree
 * ("report/zerosim-report.tex"); `make install` puts it at the same path
 * under the installed data folder, so one name serves both.
 *
 * No build folder's path is compiled in. The places looked at, in order:
 *   1. $ZEROSIM_DATADIR/NAME, when ZEROSIM_DATADIR is set (and then only
 *      there): a source tree, or any folder laid out like one;
 *   2. NAME beside the running binary: a binary run from the source tree
 *      it was built in;
 *   3. the installed data folder (PKGDATADIR/NAME, fixed at configure time).
 */
#ifndef ZS_DATAFILE_H
#define ZS_DATAFILE_H

/* The path of the shipped file NAME, readable when this returns: a fresh
 * string the caller frees. NULL, with *cause naming the places looked at,
 * when none has it. */
char *zs_datafile(const char *name, char **cause);

#endif
