/*
 * theory_nccl — NCCL's device memory per communicator and rank, from NCCL
 * v2.21.5's source (theory_nccl.h; docs/schedule.md, "NCCL's buffers",
 * cites each line), and the communicators each framework's step makes
 * (PyTorch 2.6's and DeepSpeed v0.17.0's source).
 */
#include "config.h"

#include "theory/theory_nccl.h"
#include "theory/theory.h"
#include "util/util.h"

static uint64_t round_up(uint64_t n, uint64_t to)
{
	return (n + to - 1) / to * to;
}

static unsigned next_pow2(unsigned n)
{
	unsigned p = 1;
	while (p < n)
		p *= 2;
	return p;
}

uint64_t theory_nccl_comm_bytes(unsigned world, unsigned channels, uint64_t buffsize, struct theory_nccl *out)
{
	*out = (struct theory_nccl){.channels = channels, .buffsize = buffsize};
	if (world < 2 || channels == 0)
		return 0;
	/* init.cc 1256-1273 connects every channel's ring (recv from prev,
	 * send to next) and tree (send and recv both ways with up and down)
	 * at init, each on connIndex 0; transport.cc 48, 53 skip a peer
	 * already connected. At N = 2 all four are the one peer: one send,
	 * one recv. Above, a rank inside the tree's chain (whose order is the
	 * ring's on one node) sends to and receives from both neighbours. */
	out->sends = out->recvs = world == 2 ? 1 : 2;
	/* p2p.cc 354-357 and 419-422: the sender holds its ncclSendMem, the
	 * receiver its ncclRecvMem and the three protocols' buffers, each
	 * rounded up to CUDA_IPC_MIN. (P2P read, Ampere over NVLink only,
	 * paths.cc 340, moves Simple's buffer to the sender: at the default
	 * sizes the pair is 12 MiB either way.) */
	out->send_bytes = round_up(THEORY_NCCL_CONN_MEM, THEORY_NCCL_IPC_MIN);
	out->recv_bytes = round_up(THEORY_NCCL_CONN_MEM + THEORY_NCCL_LL_BUFFSIZE + THEORY_NCCL_LL128_BUFFSIZE + buffsize,
	                           THEORY_NCCL_IPC_MIN);
	out->buffers = (uint64_t)channels * (out->sends * out->send_bytes + out->recvs * out->recv_bytes);
	/* channel.cc 41, 44, 55: three device structures per channel, for the
	 * channels rounded up to a power of two (paths.cc 748, 764, 767), and
	 * init.cc 402 the device's comm: each a cuMem granule. */
	out->struct_channels = next_pow2(channels);
	out->structures = (3 * (uint64_t)out->struct_channels + 1) * THEORY_NCCL_GRANULE;
	out->bytes = out->buffers + out->structures;
	return out->bytes;
}

unsigned theory_nccl_communicators(const struct zs_config *c, enum zs_scheme scheme, unsigned world)
{
	if (world < 2)
		return 0;
	/* DeepSpeed's engine reduces over groups._get_data_parallel_group(),
	 * a new_group of every rank (engine.py 1294; groups.py 486, 532),
	 * not the default group; ZeRO-3 also calls dist.barrier() on the
	 * default group (stage3.py 522, 531, 704): a second communicator. */
	if (c->framework == ZS_FW_DEEPSPEED)
		return scheme == ZS_ZERO3 ? 2 : 1;
	/* PyTorch's DDP, ZeroRedundancyOptimizer and FSDP's FULL_SHARD take
	 * the default group (distributed.py 663, zero_redundancy_optimizer.py
	 * 413, fsdp/_init_utils.py 136); the paper's schemes one group. */
	return 1;
}

void theory_overhead_nccl(const struct theory_request *req, enum zs_scheme scheme, unsigned world,
                          struct theory_overhead *o)
{
	struct theory_nccl n;
	o->nccl_comms = theory_nccl_communicators(req->config, scheme, world);
	if (req->nccl_channels == 0) {
		/* Measured per communicator: PyTorch, four A100s over NVLink
		 * (NVIDIA/nccl#964); NCCL's source does not reproduce them
		 * (docs/schedule.md, "NCCL's buffers"). */
		o->nccl_per_comm = world < 2 ? 0 : world == 2 ? THEORY_NCCL_PAIR_BYTES : THEORY_NCCL_RING_BYTES;
	} else {
		o->nccl_channels = req->nccl_channels;
		o->nccl_buffsize = req->nccl_buffsize > 0 ? (uint64_t)req->nccl_buffsize : THEORY_NCCL_BUFFSIZE;
		o->nccl_per_comm = theory_nccl_comm_bytes(world, o->nccl_channels, o->nccl_buffsize, &n);
	}
	o->nccl = o->nccl_comms * o->nccl_per_comm;
}

void theory_nccl_json(cJSON *f, const struct theory_overhead *o)
{
	if (o->given) {
		cJSON_AddNullToObject(f, "nccl_communicators");
		cJSON_AddNullToObject(f, "nccl_bytes_per_communicator");
	} else {
		zs_json_add_number(f, "nccl_communicators", o->nccl_comms);
		zs_json_add_number(f, "nccl_bytes_per_communicator", (double)o->nccl_per_comm);
	}
	if (o->given || o->nccl_channels == 0) {
		cJSON_AddNullToObject(f, "nccl_channels");
		cJSON_AddNullToObject(f, "nccl_buffsize_bytes");
	} else {
		zs_json_add_number(f, "nccl_channels", o->nccl_channels);
		zs_json_add_number(f, "nccl_buffsize_bytes", (double)o->nccl_buffsize);
	}
}
