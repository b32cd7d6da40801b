#!/bin/sh
# valgrind_case.sh — make valgrind's unit tests, one Check test case a job:
# a whole unit-test program under memcheck takes minutes, its test cases
# side by side (make -j valgrind) take the longest one's time.
#
#   valgrind_case.sh PROG CASE         test case CASE of tests/test_PROG
#                                      under $VALGRIND (memcheck and its
#                                      flags), CK_FORK=no as before, and
#                                      ZS_TEST_MEMCHECK=1 (tests/test_tfm's
#                                      digest sweeps at N = 3 alone: make
#                                      check, plain and under ASan and
#                                      UBSan, takes every N); its
#                                      output in valgrind-unit-PROG-CASE.log,
#                                      shown when it ends. Fails when a test
#                                      fails, memcheck finds an error or a
#                                      leak, or no test case is named CASE
#                                      (Check then runs nothing and passes).
#   valgrind_case.sh --all PROG CASE...   after every case of PROG: their
#                                      tests add up to every test the
#                                      source adds (a test case missing from
#                                      make valgrind's list fails here).
#
# Run from the build directory with srcdir set (make valgrind does).
set -u
srcdir=${srcdir:-.}
checks() { sed -n 's/^.*Checks: \([0-9][0-9]*\),.*$/\1/p' "$1" | tail -n 1; }

if [ "${1:-}" = --all ]; then
	prog=$2
	shift 2
	ran=0
	for c in "$@"; do
		n=$(checks "valgrind-unit-$prog-$c.log")
		ran=$((ran + ${n:-0}))
	done
	# Every test is added by one tcase_add_* call in the source.
	all=$(grep -c 'tcase_add' "$srcdir/tests/test_$prog.c")
	if [ "$ran" -ne "$all" ]; then
		echo "make valgrind: $ran of the $all tests of tests/test_$prog ran under valgrind (test cases run: $*);" \
			"add the missing test case to Makefile.am's valgrind-unit-$prog" >&2
		exit 1
	fi
	echo "make valgrind: tests/test_$prog: all $all tests ran under valgrind, in $# test cases"
	exit 0
fi

prog=$1 case=$2
log=valgrind-unit-$prog-$case.log
echo "CK_FORK=no CK_RUN_CASE=$case ZS_TEST_MEMCHECK=1 $VALGRIND tests/test_$prog${EXEEXT:-}"
# shellcheck disable=SC2086
CK_FORK=no CK_RUN_CASE=$case ZS_TEST_MEMCHECK=1 srcdir=$srcdir $VALGRIND "tests/test_$prog${EXEEXT:-}" >"$log" 2>&1
status=$?
sed "s/^/[$prog $case] /" "$log"
if [ $status -ne 0 ]; then
	echo "make valgrind: test case $case of tests/test_$prog FAILED under valgrind (status $status)" >&2
	exit 1
fi
n=$(checks "$log")
if [ "${n:-0}" -eq 0 ]; then
	echo "make valgrind: tests/test_$prog has no test case '$case' (it ran no test); fix Makefile.am's valgrind-unit-$prog" >&2
	exit 1
fi
exit 0
