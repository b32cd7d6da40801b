/*
 * mpi_job — zerosim as an MPI job (measure --backend mpi; built with
 * ./configure --with-mpi). P processes of MPI_COMM_WORLD carry the N ranks
 * of each run, N/P each and in order; process 0 gathers every rank's
 * figures and writes the output.
 *
 * When a process dies (killed, or crashed), the launcher (mpirun, srun)
 * stops the others with SIGTERM. Each process knows from the start the
 * process ids of the others and which of them share its machine; on that
 * signal, the first surviving process on the dead one's machine writes one
 * line naming the ranks the dead process held and the run it was in, and
 * the job ends with status 1 without writing anything (outputs are written
 * only at the end, by process 0, atomically). A process that fails says so
 * itself and ends the job (mpi_job_abort, or exit() after its line: zerosim
 * never exits without one); its end is then not reported a second time,
 * nor is a survivor's, which ends on the launcher's signal: across hosts
 * the survivors of one host may end before those of another have read
 * theirs. When the dead process had its host to itself, no survivor
 * shares its host and only the launcher's own line names it. Across hosts
 * the line can also name the wrong process: Open MPI's TCP transport
 * aborts a process whose peer's connection breaks (no hook runs), so the
 * dead one's peers on another host may end before the launcher's signal
 * reaches their neighbours, which then name one of them (a process that
 * did end, not the first); the launcher's line names the first.
 *
 * Only when HAVE_MPI is defined.
 */
#ifndef ZS_MPI_JOB_H
#define ZS_MPI_JOB_H

#include <stddef.h>

/* MPI_Init and the peers' table and signal handlers; 0 or -1. */
int mpi_job_start(int *argc, char ***argv, char **cause);
void mpi_job_finish(void);
unsigned mpi_job_size(void);
unsigned mpi_job_rank(void);

/* What this process is doing, for the line a death prints ("zero2, N=8,
 * unit=model"), and the ranks of each process in it (world/size each). */
void mpi_job_set_run(const char *what, unsigned world);

/* Gather to process 0, in place: buf holds `world` entries of `bytes`
 * each, rank k's at k·bytes; each process has filled the entries of its
 * own ranks; afterwards process 0 has them all. */
void mpi_job_gather(void *buf, size_t bytes, unsigned world);

/* End the whole job, once this process has said why (its end is then not
 * reported again as a death). */
void mpi_job_abort(int status) __attribute__((noreturn));

#endif
