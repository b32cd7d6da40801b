#!/bin/sh
# mpi_coll — the MPI collectives against the in-process ones, bit for bit
# (tests/test_coll_mpi.c), under mpirun with 1, 2, 3 and 4 processes.
set -u
. "${srcdir:-.}/tests/mpi_env.sh"
for p in 1 2 3 4; do
	echo "mpirun -np $p tests/test_coll_mpi"
	$mpirun -np $p "$top/tests/test_coll_mpi" || { echo "FAIL: test_coll_mpi under $p processes" >&2; exit 1; }
done
