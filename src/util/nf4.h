/*
 * nf4 — QLoRA's 4-bit base weight as bitsandbytes stores and computes it
 * (bitsandbytes 0.47.0, tag `0.47.0` of bitsandbytes-foundation/
 * bitsandbytes; docs/finetune.md, "QLoRA's 4-bit base"):
 *
 *  - the NF4 code book, the 16 published values of the QLoRA paper
 *    (Dettmers et al. 2023; functional.py get_4bit_type,
 *    lines 717–796);
 *  - quantize_4bit: per block of 64 elements the absolute maximum (fp32),
 *    every element scaled by 1/absmax, clamped to [-1, 1] and replaced by
 *    the index of the nearest code (the first on a tie: torch.argmin), two
 *    indices a byte, the first element in the high nibble
 *    (backends/default/ops.py lines 192–232);
 *  - dequantize_4bit: code[index] · absmax of its block (lines 235–283);
 *  - double quantization (compress_statistics, functional.py lines
 *    873–886): offset = mean(absmax), and absmax − offset quantized
 *    blockwise (blocks of 256) to 8 bits over the signed dynamic map
 *    (create_dynamic_map, lines 281–333; quantize_blockwise and
 *    dequantize_blockwise, default ops lines 149–189); dequantizing
 *    makes the fp32 absmax back and adds the offset (functional.py
 *    lines 981–984).
 *
 * The kernels are written from that algorithm (outputs first, sizes
 * last); nothing here is read from zerosim's engine. A layer (struct
 * nf4_layer) owns the storages Params4bit and its QuantState hold after
 * the weight moved to the device, each allocated once and its bytes
 * counted as it is: what `nf4_layer_bytes` predicts from the numel alone.
 *
 * Ownership: nf4_layer_quantize allocates the layer's arrays;
 * nf4_layer_free releases them. Out of memory is fatal.
 */
#ifndef ZS_UTIL_NF4_H
#define ZS_UTIL_NF4_H

#include <stddef.h>
#include <stdint.h>

/* Params4bit's blocksize on CUDA (modules.py line 228; 128 under HIP, not
 * described) and quantize_4bit's for the absmax's own blocks (line 875). */
#define NF4_BLOCK 64
#define NF4_DQ_BLOCK 256

/* The NF4 code book, ascending: index 7 is 0, 0 is -1 and 15 is 1. */
extern const float nf4_code[16];

/* The signed 8-bit dynamic map of create_dynamic_map(signed=True,
 * max_exponent_bits=7, total_bits=8): 256 values ascending, -0.99 .. 1. */
void nf4_dynamic_map(float code[256]);

/* The index of the code nearest to x (x already scaled to [-1, 1]). */
unsigned nf4_nearest(const float *code, unsigned ncode, float x);

/* NF4 of w[0..n): packed[(n + 1) / 2] (the first of each pair in the high
 * nibble; an odd n's last low nibble 0), absmax[ceil(n / 64)]. A block
 * whose values are all 0 (absmax 0) quantizes to index 7 (the code 0). */
void nf4_quantize(uint8_t *packed, float *absmax, const float *w, uint64_t n);
/* w[0..n) from packed and absmax. */
void nf4_dequantize(float *w, const uint8_t *packed, const float *absmax, uint64_t n);

/* 8-bit blockwise quantization over a 256-entry code (the dynamic map):
 * q[n], absmax[ceil(n / blocksize)]; and back. */
void nf4_quantize_blockwise(uint8_t *q, float *absmax, const float *x, const float *code, uint64_t n,
                            unsigned blocksize);
void nf4_dequantize_blockwise(float *x, const uint8_t *q, const float *absmax, const float *code, uint64_t n,
                              unsigned blocksize);

/* The bytes of one quantized weight of numel elements, as the device holds
 * them after Params4bit._quantize (modules.py lines 298–312): the packed
 * weight, its QuantState's absmax and 16-entry code; with double
 * quantization the absmax as uint8, the fp32 offset (0-dim), state2's
 * fp32 absmax and its copy of the dynamic map (quantize_blockwise's
 * QuantState, functional.py line 628: code.to(device, copy=True)).
 * `shared` is what every layer shares: name2qmap["dynamic"], made once
 * (functional.py lines 604–607). */
struct nf4_bytes {
	uint64_t packed;     /* uint8 [(n + 1) / 2, 1] */
	uint64_t absmax;     /* fp32 [blocks] without double quantization, else 0 */
	uint64_t code;       /* fp32 [16] */
	uint64_t qabsmax;    /* double quantization: uint8 [blocks] */
	uint64_t offset;     /* fp32, 0-dim */
	uint64_t absmax2;    /* fp32 [ceil(blocks / 256)] */
	uint64_t code2;      /* fp32 [256] */
	uint64_t total;      /* the layer's sum */
	uint64_t shared;     /* double quantization: the dynamic map, once a run */
};
void nf4_layer_bytes(struct nf4_bytes *b, uint64_t numel, int double_quant);

/* A quantized weight with its storages, and the bytes of each as
 * allocated (b.shared counts the map this layer made for itself: the
 * caller shares one in a run). */
struct nf4_layer {
	uint64_t n;
	int double_quant;
	uint8_t *packed;
	float *absmax;       /* NULL with double quantization */
	float code[16];
	uint8_t *qabsmax;    /* double quantization */
	float offset;
	float *absmax2;
	float *code2;        /* [256] */
	struct nf4_bytes b;  /* measured: each array's bytes as allocated */
};
/* Quantize w[0..n) into l (its arrays allocated here). */
void nf4_layer_quantize(struct nf4_layer *l, const float *w, uint64_t n, int double_quant);
/* w[0..n) back from l: the fp32 absmax first where it was quantized
 * (a temporary of blocks · 4 bytes, freed on return). */
void nf4_layer_dequantize(float *w, const struct nf4_layer *l);
void nf4_layer_free(struct nf4_layer *l);

/* dequantize_4bit (functional.py lines 930–1015) from a layer's storages
 * wherever they are held (nf4_layer's, or the engine's tracked ones):
 * with double quantization (qabsmax not NULL) the fp32 absmax made back
 * into tmp [ceil(n / 64)] and += offset first; into w[0..n). */
struct nf4_state {
	const uint8_t *packed;
	const float *absmax;     /* without double quantization */
	const uint8_t *qabsmax;  /* with it: NULL without */
	float offset;
	const float *absmax2, *code2;
};
void nf4_dequantize_state(float *w, const struct nf4_state *s, float *tmp, uint64_t n);

/* QLoRA's 4-bit base over a step description (util/step.h): the linear
 * layers util/autograd.c quantizes (every 2-D weight but the embeddings
 * and the output embedding, not LoRA's adapters; a fused tensor's parts
 * each a layer), their weights, the bytes stored for them
 * (nf4_layer_bytes a layer, the one dynamic map once with double
 * quantization), the base's other elements (kept at the run's p bytes)
 * and the largest layer's weights. The one count of the 4-bit base that
 * the theory's note, its paper level and floors, and the report use. */
struct step_params;
struct nf4_base {
	uint64_t layers, weights, held, rest, largest;
	uint64_t codes; /* of held, the packed codes' bytes (uint8 storage): the rest is the QuantStates' */
};
void nf4_base_count(const struct step_params *p, int double_quant, struct nf4_base *q);
/* Whether tensor i of p is one of those layers' weights (quantized). */
int nf4_quantized(const struct step_params *p, size_t i);

/* The 4-bit base under zerosim's own step (the paper's, DeepSpeed's own
 * dp, ZeRO-1, ZeRO-2 and ZeRO-3; docs/finetune.md, "QLoRA under the
 * paper's step and DeepSpeed's own step"): a module's product reads its weight
 * dequantized into "nf4_w" (index NF4_W), of the largest quantized tensor
 * of p (a fused one whole: the step's one product reads all its parts),
 * at the params' bytes an element (2 in mixed: the model loaded in fp16,
 * quant_state.dtype), and with double quantization the absmax made back
 * in "nf4_absmax" (NF4_ABSMAX, fp32, the most blocks of one quantized
 * layer), both scratch made at the start of forward and freed at the end
 * of backward as w32 is (role STEP_NF4), appended to b. */
enum { NF4_W, NF4_ABSMAX };

/* The 4-bit base under DeepSpeed's own ZeRO-3 (docs/finetune.md, "QLoRA
 * under DeepSpeed's own ZeRO-3"): each Params4bit's codes held as
 * elements of the model's dtype (bitsandbytes' quant_storage, PEFT's
 * ZeRO-3 QLoRA recipe), esize bytes each, so that stage 3 partitions and
 * gathers them as the other params: the CUDA kernel's (n + 1) /
 * (2·esize) elements (backends/cuda/ops.py line 320), the same n/2 bytes
 * where 2·esize divides n (zs_lora_paper_check refuses the others:
 * the default backend's view would raise). nf4_tensor_storage: tensor i
 * of p's, a fused tensor's parts each a Params4bit of its own, summed
 * (the one tensor zerosim partitions for them). */
uint64_t nf4_storage_elements(uint64_t n, unsigned esize);
uint64_t nf4_tensor_storage(const struct step_params *p, size_t i, unsigned esize);
/* Whether every quantized layer of p has 2·esize | n (0: the first that
 * does not, its elements in *n). */
int nf4_storage_exact(const struct step_params *p, unsigned esize, uint64_t *n);
struct step_buffers;
void nf4_step_buffers(struct step_buffers *b, const struct step_params *p, int mixed, int double_quant);

#endif
