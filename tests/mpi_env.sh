# mpi_env.sh — sourced by the MPI tests and the benchmark: skip (exit 77,
# with a line saying why) unless configure found MPI, and set $mpirun to
# the launcher with what this machine needs: --oversubscribe (more ranks
# than cores), and permission to run as root (CI runs as root).
top=${ZS_BUILDDIR:-.}
if ! grep -q '^#define HAVE_MPI 1' "$top/config.h" 2>/dev/null; then
	echo "SKIP: zerosim was configured without MPI (./configure --with-mpi builds the MPI backend)"
	exit 77
fi
launcher=${MPIRUN:-$(command -v mpirun || command -v mpiexec || true)}
if [ -z "$launcher" ]; then
	echo "SKIP: configured with MPI, but no mpirun or mpiexec on PATH"
	exit 77
fi
mpirun="$launcher --oversubscribe"
if [ "$(id -u)" -eq 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# One machine, no network interfaces to probe or warn about.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# More processes than cores: wait for messages without spinning.
export OMPI_MCA_mpi_yield_when_idle=1
