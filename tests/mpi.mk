# The MPI backend (./configure --with-mpi): its sources, and its tests,
# which run under mpirun. Without MPI the test scripts skip, saying so.
if HAVE_MPI
libzsengine_a_SOURCES += src/engine/coll_mpi.c src/engine/coll_mpi.h \
	src/engine/mpi_job.c src/engine/mpi_job.h
AM_CPPFLAGS += $(MPI_CFLAGS)

check_PROGRAMS += tests/test_coll_mpi
tests_test_coll_mpi_SOURCES = tests/test_coll_mpi.c
tests_test_coll_mpi_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_coll_mpi_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
endif

# An MPI run's file against the in-process one's (needs no MPI itself).
check_PROGRAMS += tests/mpi_agree
tests_mpi_agree_SOURCES = tests/mpi_agree.c
tests_mpi_agree_LDADD = libzsutil.a $(CJSON_LIBS)

# The tests that run mpirun (CI's MPI flavour runs them one at a time, make
# check TESTS='$(MPI_TESTS)', then MPI_BUILD_TESTS side by side).
MPI_TESTS = tests/mpi_coll.sh tests/mpi_measure.sh tests/mpi_kill.sh tests/mpi_hosts.sh
# The other tests whose code the MPI build changes (src/engine/sweep.c,
# engine.c and src/cli/cmd_measure.c under HAVE_MPI: the sweep's and a run's
# ranks, --backend's checks and errors): CI's MPI flavour runs these after
# MPI_TESTS, not the whole suite, which the same sources already pass in
# the default build and under the sanitizers; and the two that skip under
# the sanitizers (memlimit.sh, signal_write.sh), so that they run from the
# tarball too.
MPI_BUILD_TESTS = tests/test_engine tests/cli_errors.sh tests/hostile.sh tests/memlimit.sh tests/signal_write.sh
TESTS += $(MPI_TESTS) tests/report_overhead.sh
EXTRA_DIST += tests/mpi_coll.sh tests/mpi_measure.sh tests/mpi_kill.sh tests/mpi_hosts.sh tests/mpi_env.sh tests/mpi_netns.sh tests/report_overhead.sh
