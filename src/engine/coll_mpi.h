/*
 * coll_mpi — the collectives of coll.h over ranks split across MPI
 * processes: P processes (MPI_COMM_WORLD) carry N ranks, N/P each, process
 * p holding the contiguous ranks [p·N/P, (p+1)·N/P). Within a process the
 * ranks meet in memory; across processes data moves through MPI.
 *
 * A reduce-scatter is an all-to-all of shards (each rank's slots of every
 * other process's ranks, MPI_Alltoallv) followed by the ordered local sum
 * of coll.c (ranks 0..N-1 in fp32, divided by N, rounded once), so every
 * shard is bitwise the in-process backend's. It sends (N - N/P)·s elements
 * of each rank's buffer, as a ring reduce-scatter sends (N-1)·s at P = N.
 * An all-gather hands each process's shards once to MPI_Allgatherv; an
 * all-reduce is the two. A broadcast (torch's ZeroRedundancyOptimizer) is
 * MPI_Bcast from the root rank's process into the first local rank's
 * buffer of every other process, which its other ranks copy. The all-to-all goes in chunks through staging
 * buffers of at most COLL_MPI_STAGE bytes each way, which the tracker does
 * not see (they belong to the process, not to a rank).
 *
 * Ownership: coll_init_mpi fills c; the caller releases it with
 * coll_destroy (coll.h). MPI must be initialised before and finalised after.
 */
#ifndef ZS_COLL_MPI_H
#define ZS_COLL_MPI_H

#include "engine/coll.h"

#define COLL_MPI_STAGE ((size_t)4 << 20)

/* The backend for `world` ranks over the processes of MPI_COMM_WORLD;
 * fails (with a sentence) unless the number of processes divides world. */
int coll_init_mpi(struct zs_coll *c, unsigned world, char **cause);

/* Stage through at most `bytes` each way instead (tests make the chunks
 * small, so that a small unit goes in many). */
void coll_mpi_set_stage(struct zs_coll *c, size_t bytes);

#endif
