// The one ABI every sdpa stage exports. Stage sources stay torch-free: they see
// raw device pointers, element strides and a stream, nothing else.
//
// Layout: Q and O are [batch, heads, seq_len, head_dim], K and V [batch, kv_heads,
// kv_seq_len, head_dim], each with the last dim contiguous (stride 1) and any other
// strides (a [batch, seq, heads, head_dim] buffer viewed as bhsd is read in place).
// Strides are in elements, not bytes.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

enum SdpaDtype : int32_t {
  kSdpaFloat16 = 0,
  kSdpaBFloat16 = 1,
};

struct SdpaTensorStrides {
  int64_t batch;
  int64_t head;
  int64_t seq;
};

struct SdpaProblem {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  SdpaTensorStrides q_strides;
  SdpaTensorStrides k_strides;
  SdpaTensorStrides v_strides;
  SdpaTensorStrides out_strides;
  int32_t batch;
  int32_t heads;
  int32_t seq_len;     // queries (and keys, but for kv_seq_len below)
  int32_t head_dim;    // 64 or 128
  float softmax_scale; // applied to Q.K^T before the softmax
  int32_t causal;      // nonzero: key j is visible to query i only when j <= i
  int32_t dtype;       // SdpaDtype
  // Grouped-query attention and a key length apart from the query length. Only a stage built
  // with SDPA_GENERAL_PROBLEM takes kv_heads != heads or kv_seq_len != seq_len (sdpa_check_problem
  // rejects them elsewhere). Query head h reads K/V head h / (heads / kv_heads); the causal mask
  // is aligned bottom-right: query i sees key j when j <= i + kv_seq_len - seq_len.
  int32_t kv_heads;    // divides heads
  int32_t kv_seq_len;  // causal: at least seq_len
};

// Launches the stage's kernel on `stream` and returns cudaGetLastError() of the
// launch, or cudaErrorInvalidValue for a problem the stage does not support
// (the Python wrapper rejects those before any launch; this is the backstop).
extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream);

// Human-readable one-liner naming the stage's compile-time configuration
// (tile sizes, threads per block), logged next to the resource report.
extern "C" const char* sdpa_stage_config();

// Shared memory the stage asks for at launch (dynamic), in bytes, for one
// head_dim and dtype; 0 when all of it is static. ptxas reports only static
// shared memory, so the resource gates need this to see the whole footprint.
extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype);

// ---------------------------------------------------------- launch plans --
// Optional: a stage whose sdpa_forward chooses among several kernel instances and schedules
// per problem exports its launch plans, so the lab can say which plan a problem takes (on the
// CPU, `stagelab coverage`) and which plan each checked launch ran. A plan names the kernel
// instance's parts, its scheduler and its split, e.g.
//   "hd64 dense long.three_turns wgs=3 rows=192 keys=128 stages=3 q_buffers=2 turns=1
//    kv_multicast=off epilogue=direct sched=mixed-snake split=1"
// The device as the host's plan sees it.
struct SdpaDevice {
  int32_t sms;       // streaming multiprocessors
  int64_t l2_bytes;  // L2 cache
};
// Writes the plan `problem` takes on `device` (NUL-terminated, truncated to capacity) and returns
// its length, or -1 when the stage rejects the problem. Reads the problem's shape only.
extern "C" int32_t sdpa_launch_plan(const SdpaProblem* problem, const SdpaDevice* device, char* out, int32_t capacity);
// Every plan the stage's build can take, one per line; returns the length (as above).
extern "C" int32_t sdpa_launch_plans(char* out, int32_t capacity);
// The plan of this thread's last sdpa_forward that launched ("" before any).
extern "C" const char* sdpa_last_launch_plan();

// ------------------------------------------------------ protocol checks --
// Optional: a warp-specialized stage built with SDPA_PROTOCOL=1 (instrument/protocol.cuh) checks the
// rules of its K/V rings as it runs and keeps the first violation. Writes it as one line ("rule
// release_before_retire, ring K, slot 1, ring index 5, block 3, consumer warpgroup 0"; "" when none),
// clears it, and returns the length, or -1 when the record cannot be read.
extern "C" int32_t sdpa_protocol_report(char* out, int32_t capacity);

// ------------------------------------------------------------------ FP8 --
// An FP8 (e4m3) stage exports sdpa_fp8_forward and sdpa_fp8_scratch_bytes
// besides the three above (whose sdpa_forward may reject every problem).
// `attn` describes the problem as for sdpa_forward, except that q, k and v
// point to float8_e4m3fn data (strides still in elements, now of one byte)
// and `attn.dtype` is the output's dtype (the unquantized inputs' dtype).
// Each descale is float32 [batch, heads], contiguous: the value an e4m3
// element of (batch b, head h) is multiplied by to give the real value.
struct SdpaFp8Problem {
  SdpaProblem attn;
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  void* scratch;          // device memory of at least sdpa_fp8_scratch_bytes(this) bytes,
  int64_t scratch_bytes;  // 256-byte aligned, owned by the caller, free to overwrite
};

// O = softmax(Q.K^T * softmax_scale * q_descale * k_descale) . V * v_descale,
// in attn.dtype; returns as sdpa_forward does.
extern "C" cudaError_t sdpa_fp8_forward(const SdpaFp8Problem* problem, cudaStream_t stream);

// Scratch the stage needs for this problem (e.g. a transposed copy of V), in bytes.
extern "C" int64_t sdpa_fp8_scratch_bytes(const SdpaFp8Problem* problem);

// ----------------------------------------------------------------- INT8 --
// An INT8 stage (8-bit Q.K^T, e4m3 P.V) exports sdpa_int8_forward besides the three above (its
// sdpa_forward rejects every problem). `attn` describes the problem as for sdpa_forward, except:
// q and k point to int8 data (strides in elements, now of one byte); v points to Vt, V in e4m3
// transposed to [batch, kv_heads, head_dim, vt_key_stride] (contiguous, zero past kv_seq_len) with
// the keys of every group of 32 permuted as P's register fragments hold them (fp8/wgmma8.cuh's
// fp8_key_of: column 32 g + k holds key 32 g + fp8_key_of(k)); `attn.v_strides` is unused;
// `attn.dtype` is the output's dtype. Every descale is float32, contiguous, the value an 8-bit
// element is multiplied by to give the real one (K's after its mean over the keys was subtracted,
// V's after v_mean was: the kernel adds v_mean to every output row, since P's rows sum to one).
struct SdpaInt8Problem {
  SdpaProblem attn;
  const float* q_descale;  // [batch, heads, ceil(seq_len / 64)]: one per 64 query rows
  const float* k_descale;  // [batch, kv_heads, ceil(kv_seq_len / 128)]: one per 128 keys
  const float* v_descale;  // [batch, kv_heads, head_dim]: one per channel
  const float* v_mean;     // [batch, kv_heads, head_dim]: what Vt's V was smoothed by (zeros if not)
  int64_t vt_key_stride;   // Vt's row length in keys: kv_seq_len rounded up to a multiple of 16
};

// O = softmax(Q.K^T * softmax_scale) . V from the 8-bit operands, in attn.dtype; returns as
// sdpa_forward does.
extern "C" cudaError_t sdpa_int8_forward(const SdpaInt8Problem* problem, cudaStream_t stream);

// Optional: an INT8 stage may export its quantizer, which makes SdpaInt8Problem's operands from
// fp16/bf16 Q [batch, heads, seq_len, head_dim] and K, V [batch, kv_heads, kv_seq_len, head_dim]
// by the recipe of lib/stagelab/families/sdpa/int8/ (quantize.py, operands.py): Q int8 per 64 rows,
// K smoothed by its mean over the keys then int8 per 128 keys, V smoothed the same then e4m3 per
// channel, as Vt. `inputs` describes Q, K, V as for sdpa_forward (head_dim 64 or 128; strides
// multiples of 8 elements and bases 16-byte aligned); its out, out_strides, softmax_scale and
// causal are unused. Every output
// is contiguous, on the device, and written whole (Vt's padding columns as zeros):
struct SdpaInt8Quantize {
  SdpaProblem inputs;
  int8_t* q8;              // [batch, heads, seq_len, head_dim] (8-byte aligned)
  float* q_descale;        // [batch, heads, ceil(seq_len / 64)]
  int8_t* k8;              // [batch, kv_heads, kv_seq_len, head_dim]: K - k_mean (8-byte aligned)
  float* k_descale;        // [batch, kv_heads, ceil(kv_seq_len / 128)]
  float* k_mean;           // [batch, kv_heads, head_dim]: K's mean over the keys, float32 (16-byte aligned)
  void* vt;                // e4m3 [batch, kv_heads, head_dim, vt_key_stride] as SdpaInt8Problem's (16-byte aligned)
  float* v_descale;        // [batch, kv_heads, head_dim]: of V - v_mean (16-byte aligned)
  float* v_mean;           // [batch, kv_heads, head_dim]: V's mean over the keys, float32 (16-byte aligned)
  int64_t vt_key_stride;   // kv_seq_len rounded up to a multiple of 16
};

// Device scratch the quantizer needs for this problem, in bytes (per-block partial sums).
extern "C" int64_t sdpa_int8_quantize_scratch_bytes(const SdpaInt8Quantize* args);

// Launches the quantizer's kernels on `stream` (deterministic: the same inputs give the same bytes);
// scratch: at least sdpa_int8_quantize_scratch_bytes, 16-byte aligned, free to overwrite. Returns
// as sdpa_forward does (cudaErrorInvalidValue for arguments it does not take).
extern "C" cudaError_t sdpa_int8_quantize(const SdpaInt8Quantize* args, void* scratch, int64_t scratch_bytes,
                                          cudaStream_t stream);
