/*
 * theory_nccl — what NCCL holds on a rank's GPU per communicator, from NCCL
 * v2.21.5's source (the release PyTorch 2.6's wheels bundle), and how many
 * communicators each framework's step makes. docs/schedule.md, "NCCL's
 * buffers", gives every constant's file and line; these are pure functions.
 */
#ifndef ZS_THEORY_NCCL_H
#define ZS_THEORY_NCCL_H

#include <stdint.h>
#include <cjson/cJSON.h>

#include "util/config.h"

/* The protocols' buffer sizes per connection (src/init.cc 542-547): Simple's
 * NCCL_BUFFSIZE, 4 MiB by default; LL's 8 lines × 512 threads × 8 steps ×
 * 16 B; LL128's 120 elements × 640 threads × 8 steps × 8 B. */
#define THEORY_NCCL_BUFFSIZE (UINT64_C(1) << 22)
#define THEORY_NCCL_LL_BUFFSIZE (UINT64_C(8) * 512 * 8 * 16)
#define THEORY_NCCL_LL128_BUFFSIZE (UINT64_C(120) * 640 * 8 * 8)
/* struct ncclSendMem and ncclRecvMem, each padded to MEM_ALIGN (comm.h 30,
 * 39-63), and CUDA_IPC_MIN, to which p2p.cc rounds a connection's buffer
 * (comm.h 32; p2p.cc 357, 422). */
#define THEORY_NCCL_CONN_MEM UINT64_C(4096)
#define THEORY_NCCL_IPC_MIN UINT64_C(2097152)
/* cuMem's granule, to which ncclCuMemAlloc rounds each small device
 * structure (alloc.h 100-101): 2 MiB on NVIDIA's GPUs. */
#define THEORY_NCCL_GRANULE UINT64_C(2097152)
#define THEORY_NCCL_MAXCHANNELS 32u /* MAXCHANNELS, device.h 54 */
/* The largest NCCL_BUFFSIZE whose receive buffer's size fits p2p.cc 419's
 * int beside the other protocols' and its ncclRecvMem. */
#define THEORY_NCCL_MAX_BUFFSIZE \
	(UINT64_C(2147483647) - THEORY_NCCL_CONN_MEM - THEORY_NCCL_LL_BUFFSIZE - THEORY_NCCL_LL128_BUFFSIZE)

/* One communicator on the busiest of its ranks, all on one node over the
 * P2P transport (NVLink or PCIe), at a given channel count. */
struct theory_nccl {
	unsigned channels;        /* the collectives' channels */
	uint64_t buffsize;        /* Simple's, NCCL_BUFFSIZE */
	unsigned sends, recvs;    /* connections per channel */
	uint64_t send_bytes;      /* one send connection's buffer */
	uint64_t recv_bytes;      /* one receive connection's buffer */
	unsigned struct_channels; /* channels given device structures */
	uint64_t buffers;         /* channels × (sends·send + recvs·recv) */
	uint64_t structures;      /* the small structures, a granule each */
	uint64_t bytes;           /* buffers + structures */
};

/* Fills *out for one communicator of `world` ranks at `channels` (1 to
 * THEORY_NCCL_MAXCHANNELS) and Simple's `buffsize`, and returns out->bytes:
 * 0 at world 1 (no peer, no connection). */
uint64_t theory_nccl_comm_bytes(unsigned world, unsigned channels, uint64_t buffsize, struct theory_nccl *out);

/* The NCCL communicators a rank's step makes (one per process group it
 * runs a collective on): 1 for the paper, PyTorch's DDP, ZeRO-1 and FSDP;
 * DeepSpeed's engine 1 (its clone of the world group), 2 under ZeRO-3 (the
 * default group too, for its barriers); 0 at world 1. */
unsigned theory_nccl_communicators(const struct zs_config *c, enum zs_scheme scheme, unsigned world);

/* NCCL's part of theory_device_overhead (theory.h): o->nccl and the
 * nccl_* fields it was computed from, for the scheme's step at world. */
struct theory_request;
struct theory_overhead;
void theory_overhead_nccl(const struct theory_request *req, enum zs_scheme scheme, unsigned world,
                          struct theory_overhead *o);
/* What o's nccl_bytes was computed from, into the row's device_overhead
 * object f (docs/formats.md): nccl_communicators, nccl_bytes_per_communicator,
 * nccl_channels and nccl_buffsize_bytes (null for the measured figures;
 * all four null under --device-overhead). */
void theory_nccl_json(cJSON *f, const struct theory_overhead *o);

#endif
