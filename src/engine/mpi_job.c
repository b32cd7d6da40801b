/*
 * mpi_job — see mpi_job.h. The signal handler uses only async-signal-safe
 * calls (kill, open, read, write, nanosleep, _exit).
 */
#include "config.h"

/* Built only with MPI (./configure --with-mpi); linted in either build. */
#ifdef HAVE_MPI

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/mpi_job.h"
#include "util/util.h"

static int *pids; /* every process's */
static int nproc = 1, me;
/* The processes on this machine share one byte each (an MPI shared-memory
 * window): set by a process that has said why it stops, or that stops on
 * the launcher's signal, so that its end is not taken for a death. node[p] is process p's byte, or
 * -1 for a process on another machine. */
static MPI_Comm node_comm = MPI_COMM_NULL;
static MPI_Win node_win = MPI_WIN_NULL;
static volatile char *reported;
static int *node;
static char run_what[128] = "set-up";
static unsigned run_world;
static volatile sig_atomic_t stopping;
static int running; /* between mpi_job_start and mpi_job_finish */

/* ------------------------------------------------------------------------- */
/* the line a death prints */

/* Append s to buf[*len], within cap. */
static void put(char *buf, size_t *len, size_t cap, const char *s)
{
	while (*s != '\0' && *len + 1 < cap)
		buf[(*len)++] = *s++;
}

static void put_uint(char *buf, size_t *len, size_t cap, unsigned long v)
{
	char d[24];
	size_t n = 0;
	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0 && n < sizeof d);
	while (n > 0 && *len + 1 < cap)
		buf[(*len)++] = d[--n];
}

static int same_host(int p) { return node[p] >= 0; }

/* The process is gone: no such process, or a zombie not yet reaped. */
static int gone(int p)
{
	if (kill(pids[p], 0) != 0)
		return errno == ESRCH;
	char path[40];
	size_t len = 0;
	put(path, &len, sizeof path, "/proc/");
	put_uint(path, &len, sizeof path, (unsigned long)pids[p]);
	put(path, &len, sizeof path, "/stat");
	path[len] = '\0';
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 1;
	char st[256];
	ssize_t n = read(fd, st, sizeof st - 1);
	close(fd);
	if (n <= 0)
		return 1;
	st[n] = '\0';
	const char *paren = strrchr(st, ')');
	return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static void on_stop(int sig)
{
	(void)sig;
	if (stopping)
		return;
	stopping = 1;
	int dead = -1;
	for (int p = 0; p < nproc && dead < 0; p++)
		if (p != me && same_host(p) && gone(p))
			dead = p;
	if (dead >= 0 && reported[node[dead]])
		dead = -1; /* it said why, and the launcher stops the rest */
	int first = dead >= 0;
	for (int p = 0; p < me && first; p++)
		if (p != dead && same_host(p) && !gone(p))
			first = 0;
	if (first) {
		char line[512];
		size_t len = 0, cap = sizeof line;
		unsigned per = run_world / (unsigned)nproc;
		put(line, &len, cap, "zerosim measure: ");
		if (per == 0) {
			put(line, &len, cap, "MPI process ");
			put_uint(line, &len, cap, (unsigned long)dead);
		} else if (per == 1) {
			put(line, &len, cap, "rank ");
			put_uint(line, &len, cap, (unsigned long)dead);
		} else {
			put(line, &len, cap, "ranks ");
			put_uint(line, &len, cap, (unsigned long)dead * per);
			put(line, &len, cap, "-");
			put_uint(line, &len, cap, (unsigned long)(dead + 1) * per - 1);
		}
		put(line, &len, cap, " (MPI process ");
		put_uint(line, &len, cap, (unsigned long)dead);
		put(line, &len, cap, " of ");
		put_uint(line, &len, cap, (unsigned long)nproc);
		put(line, &len, cap, ", pid ");
		put_uint(line, &len, cap, (unsigned long)pids[dead]);
		put(line, &len, cap, ") ended during ");
		put(line, &len, cap, run_what);
		put(line, &len, cap, "; the job stops, nothing written");
		line[len++] = '\n';
		ssize_t w = write(STDERR_FILENO, line, len);
		(void)w;
	}
	/* This end is no death: a survivor that comes here late (a busy
	 * machine delays signals) finds it gone and must not take it for one.
	 * Across hosts that is the rule, not a race: the survivors on the
	 * dead one's host say nothing, and end while their neighbours are
	 * still on their way here. */
	reported[node[me]] = 1;
	/* Stay a moment all the same (the launcher's SIGKILL comes after a
	 * second). */
	struct timespec ts = {0, 300000000};
	nanosleep(&ts, NULL);
	_exit(ZS_EXIT_RUNTIME);
}

/* A process that calls exit() while the job runs has said why on stderr
 * (zs_oom, a bucket that cannot be mapped): its end is not a death to
 * report again. */
static void on_exit_while_running(void)
{
	if (running)
		reported[node[me]] = 1;
}

/* ------------------------------------------------------------------------- */

int mpi_job_start(int *argc, char ***argv, char **cause)
{
	if (MPI_Init(argc, argv) != MPI_SUCCESS)
		return zs_fail(cause, "MPI_Init failed");
	MPI_Comm_size(MPI_COMM_WORLD, &nproc);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	pids = zs_calloc((size_t)nproc, sizeof *pids);
	int self = (int)getpid();
	MPI_Allgather(&self, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm);
	int nlocal, local;
	MPI_Comm_size(node_comm, &nlocal);
	MPI_Comm_rank(node_comm, &local);
	char *base;
	MPI_Win_allocate_shared(local == 0 ? nlocal : 0, 1, MPI_INFO_NULL, node_comm, &base, &node_win);
	MPI_Aint size;
	int disp;
	MPI_Win_shared_query(node_win, 0, &size, &disp, &base);
	reported = base;
	reported[local] = 0;
	MPI_Barrier(node_comm);
	MPI_Group world_group, node_group;
	MPI_Comm_group(MPI_COMM_WORLD, &world_group);
	MPI_Comm_group(node_comm, &node_group);
	int *all = zs_calloc((size_t)nproc, sizeof *all);
	node = zs_calloc((size_t)nproc, sizeof *node);
	for (int p = 0; p < nproc; p++)
		all[p] = p;
	MPI_Group_translate_ranks(world_group, nproc, all, node_group, node);
	for (int p = 0; p < nproc; p++)
		if (node[p] == MPI_UNDEFINED)
			node[p] = -1;
	free(all);
	MPI_Group_free(&world_group);
	MPI_Group_free(&node_group);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigfillset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	static int registered;
	if (!registered++)
		atexit(on_exit_while_running);
	running = 1;
	return 0;
}

void mpi_job_finish(void)
{
	running = 0;
	MPI_Win_free(&node_win);
	MPI_Comm_free(&node_comm);
	MPI_Finalize();
	free(pids);
	free(node);
	pids = NULL;
	node = NULL;
}

unsigned mpi_job_size(void) { return (unsigned)nproc; }
unsigned mpi_job_rank(void) { return (unsigned)me; }

void mpi_job_set_run(const char *what, unsigned world)
{
	/* Written here, read by the handler: block it meanwhile. */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	size_t len = 0;
	put(run_what, &len, sizeof run_what, what);
	run_what[len] = '\0';
	run_world = world;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

void mpi_job_gather(void *buf, size_t bytes, unsigned world)
{
	if (nproc == 1 || bytes == 0)
		return;
	if (bytes > INT_MAX) {
		zs_print_error("zerosim", "internal error: a rank's figures exceed 2^31 bytes");
		mpi_job_abort(ZS_EXIT_RUNTIME);
	}
	unsigned per = world / (unsigned)nproc;
	MPI_Datatype one;
	MPI_Type_contiguous((int)bytes, MPI_BYTE, &one);
	MPI_Type_commit(&one);
	char *mine = (char *)buf + (size_t)me * per * bytes;
	MPI_Gather(me == 0 ? MPI_IN_PLACE : mine, (int)per, one, buf, (int)per, one, 0, MPI_COMM_WORLD);
	MPI_Type_free(&one);
}

void mpi_job_abort(int status)
{
	reported[node[me]] = 1;
	MPI_Abort(MPI_COMM_WORLD, status);
	_exit(status);
}

#endif /* HAVE_MPI */
