/*
 * cli — the subcommands of the zerosim binary. Each takes the arguments
 * after its name (argv[0] is the subcommand) and returns the exit status:
 * 0 success, 1 failure at run time, 2 bad usage or bad input (docs/design.md).
 */
#ifndef ZS_CLI_H
#define ZS_CLI_H

int zs_cmd_measure(int argc, char **argv);
int zs_cmd_theory(int argc, char **argv);
int zs_cmd_report(int argc, char **argv);

#endif
