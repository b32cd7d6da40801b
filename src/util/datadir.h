/*
 * datadir — where zerosim finds the data it ships (the report template,
 * data/models/NAME.json) at run time, installed or not. One lookup for every
 * stage, so that no build folder's path is ever compiled into the binary.
 */
#ifndef ZS_DATADIR_H
#define ZS_DATADIR_H

/* The path of a shipped file or folder, the first that exists of:
 *   1. $ZEROSIM_DATADIR/INSTALLED, then $ZEROSIM_DATADIR/IN_TREE, when the
 *      variable is set and not empty (it may name an installed data folder
 *      or a source tree); nothing else is tried then;
 *   2. EXEDIR/IN_TREE, where EXEDIR holds the running executable: a binary
 *      built in its source tree, not installed;
 *   3. the installed data folder (ZS_DATADIR, configure's pkgdatadir)
 *      followed by /INSTALLED.
 * INSTALLED is the path under pkgdatadir ("models", "zerosim-report.tex"),
 * IN_TREE the path in the source tree ("data/models",
 * "report/zerosim-report.tex"). Returns a string the caller frees with
 * free(), or NULL with *cause naming the places tried. */
char *zs_data_find(const char *installed, const char *in_tree, char **cause);

#endif
