// int8/quantize.cuh -- the INT8 stage's quantizer on the GPU: fp16/bf16 Q, K, V in, the operands
// SdpaInt8Problem reads out, exactly as lib/stagelab/families/sdpa/int8/quantize.py (the recipe)
// and operands.py (Vt) make them:
//   q8 [B, H, Sq, D] int8 and q_descale [B, H, ceil(Sq / 64)];
//   k_mean [B, Hkv, D] (K's mean over the keys), k8 [B, Hkv, Sk, D] int8 of K - k_mean and
//   k_descale [B, Hkv, ceil(Sk / 128)];
//   v_mean [B, Hkv, D] (V's mean over the keys), vt [B, Hkv, D, Sk rounded up to 16] e4m3 of
//   V - v_mean (keys permuted per 32 as fp8_key_of, zero past Sk) and v_descale [B, Hkv, D]
//   (amax of |V - v_mean| over the keys / 448).
// Three launches, every sum in a fixed order (no float atomics: the same inputs give the same bytes):
//   1. int8_stats_kernel: a block of 64 Q rows quantized whole (it needs no statistic), or a block of
//      128 keys reduced to K's and V's per-channel sums (float64) and V's per-channel max and min,
//      into scratch;
//   2. int8_finalize_kernel: per (batch, kv head) the blocks' partials in block order: k_mean, v_mean,
//      and v_descale from V's max and min: float32 subtraction is monotone, so the largest
//      |V - v_mean| over the keys is max(vmax - v_mean, v_mean - vmin), bit for bit;
//   3. int8_kv_kernel: a block of 128 keys of K smoothed and quantized, or of V smoothed, scaled into
//      e4m3 and transposed into Vt through shared memory.
// Exactness against the torch quantizer: Q's bytes and descales are the same bit for bit (float32
// division by the descale, round half to even, clamp to +-127; the descale float32(float64(amax) /
// 127 or 448)). K's and V's means are summed in float64 here and in float32 by torch in torch's
// order, so they may differ by float32 rounding; K's codes and descales and V's e4m3 bytes (by
// cvt.rn.satfinite) and descales are then exactly torch's formula applied to these means
// (tests/test_int8_quantize_gpu.py).
#pragma once

#include <cfloat>
#include <cstdint>

#include "../sdpa_common.cuh"
#include "tile.cuh"

namespace sdpa_int8 {

constexpr int kQuantizeThreads = 256;
constexpr int kQuantizeWarps = kQuantizeThreads / 32;
constexpr double kE4m3Max = 448.0;      // e4m3fn's largest finite value (fp8/quantize.py E4M3_MAX)
constexpr int kVtKeyPad = 16;           // Vt rows are padded to whole 16-byte TMA strides (operands.py VT_PAD)
constexpr int kVtWordsPitch = kKBlock / 4 + 1;  // Vt staging: one row of 32-bit words per channel, odd pitch
static_assert(kQBlock == 64 && kKBlock == 128, "the recipe's blocks (recipe.py Q_BLOCK, K_BLOCK)");
static_assert(kKBlock % kFp8KeyGroup == 0, "a key block holds whole permuted 32-key groups");

// The kernels' view of SdpaInt8Quantize, with its block counts and the scratch split in two.
struct QuantizeArgs {
  SdpaInt8Quantize a;
  int q_blocks, k_blocks;  // per head: ceil(Sq / 64), ceil(Sk / 128)
  int q_tasks, kv_tasks;   // B * H * q_blocks, B * Hkv * k_blocks
  double* k_sum;           // [B, Hkv, k_blocks, D]: each block's per-channel sum of K
  double* v_sum;           // [B, Hkv, k_blocks, D]: the same of V
  float* v_max;            // [B, Hkv, k_blocks, D]: each block's per-channel max of V
  float* v_min;            // [B, Hkv, k_blocks, D]: and min
};

// blocks.py's amax_descales: float32(float64(amax) / largest code), 1 for an all-zero block, and
// never below float32's tiny.
__device__ __forceinline__ float amax_descale(float amax, double largest_code) {
  const float descale = amax > 0.0f ? static_cast<float>(static_cast<double>(amax) / largest_code) : 1.0f;
  return fmaxf(descale, FLT_MIN);
}

// torch.round(x / descale).clamp(-127, 127): IEEE division, round half to even (cvt.rni).
__device__ __forceinline__ uint32_t int8_code(float x, float descale) {
  const int code = __float2int_rn(__fdiv_rn(x, descale));
  return static_cast<uint32_t>(min(max(code, -kInt8Max), kInt8Max)) & 0xffu;
}

// Eight floats from 16-byte aligned memory (k_mean's, v_mean's and v_descale's rows of one chunk's channels).
__device__ __forceinline__ void load_floats8(const float* from, float* to) {
  const float4 lo = *reinterpret_cast<const float4*>(from), hi = *reinterpret_cast<const float4*>(from + 4);
  to[0] = lo.x, to[1] = lo.y, to[2] = lo.z, to[3] = lo.w, to[4] = hi.x, to[5] = hi.y, to[6] = hi.z, to[7] = hi.w;
}

// Every thread gets the block's largest x (x >= 0). `red` holds kQuantizeWarps floats; the trailing
// barrier lets the caller reuse it.
__device__ __forceinline__ float block_max(float x, float* red) {
  x = sdpa_lanes_max<32>(x);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float m = red[0];
#pragma unroll
  for (int w = 1; w < kQuantizeWarps; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  return m;
}

// kRows rows of one head as 16-byte chunks of 8 elements: thread t holds column chunk
// t % kChunksPerRow of rows t / kChunksPerRow + i * kRowsPerPass (a warp reads whole rows).
template <class T, int D, int kRows>
struct BlockRows {
  static constexpr int kElems = kSdpaVecElems<T>;
  static constexpr int kChunksPerRow = D / kElems;
  static constexpr int kRowsPerPass = kQuantizeThreads / kChunksPerRow;
  static constexpr int kPasses = kRows / kRowsPerPass;
  static_assert(D % kElems == 0 && kQuantizeThreads % kChunksPerRow == 0, "whole chunks, whole rows per pass");
  static_assert(kRows % kRowsPerPass == 0 && 32 % kChunksPerRow == 0, "whole passes; a warp's lanes share columns");
  SdpaVec16 chunk[kPasses];
  int col = (threadIdx.x % kChunksPerRow) * kElems;
  int first_row = threadIdx.x / kChunksPerRow;

  __device__ __forceinline__ int row(int i) const { return first_row + i * kRowsPerPass; }
  // Rows row0 + row(i); those at or past `rows` read as zeros (they change no sum and no amax). Every
  // load is issued (a row past the end reads the last row again, then drops it), so all of a
  // thread's loads are in flight at once; predicated loads were issued two at a time.
  __device__ __forceinline__ void load(const T* head, int64_t seq_stride, int row0, int rows) {
#pragma unroll
    for (int i = 0; i < kPasses; ++i)
      chunk[i] = *reinterpret_cast<const SdpaVec16*>(head + min(row0 + row(i), rows - 1) * seq_stride + col);
#pragma unroll
    for (int i = 0; i < kPasses; ++i)
      if (row0 + row(i) >= rows) chunk[i] = SdpaVec16{0, 0, 0, 0};
  }
  __device__ __forceinline__ void values(int i, float* out) const { sdpa_vec_to_float<T>(chunk[i], out); }
};

// One block of rows quantized to int8 with one descale (Q's 64 rows, or K's 128 keys less k_mean):
// the block's amax, its descale, and each valid row's 8 codes per thread as one 8-byte store.
template <class T, int D, int kRows, bool kSmooth>
__device__ __forceinline__ void quantize_block(const T* head, int64_t seq_stride, int row0, int rows, const float* mean,
                                               int8_t* codes, float* descale_out, float* red) {
  BlockRows<T, D, kRows> x;
  x.load(head, seq_stride, row0, rows);
  static_assert(BlockRows<T, D, kRows>::kElems == 8, "a chunk's channels: two float4 of k_mean");
  float shift[8] = {};
  if constexpr (kSmooth) load_floats8(mean + x.col, shift);
  // K - k_mean in float32 as torch subtracts it; Q as it is.
  const auto value = [&](float v, int e) { return kSmooth ? __fsub_rn(v, shift[e]) : v; };
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < x.kPasses; ++i) {
    float v[x.kElems];
    x.values(i, v);
    if (row0 + x.row(i) < rows) {  // a padded row is 0, not 0 - mean (blocks.py pads after smoothing)
#pragma unroll
      for (int e = 0; e < x.kElems; ++e) amax = fmaxf(amax, fabsf(value(v[e], e)));
    }
  }
  const float descale = amax_descale(block_max(amax, red), kInt8Max);
  if (threadIdx.x == 0) *descale_out = descale;
#pragma unroll
  for (int i = 0; i < x.kPasses; ++i) {
    const int r = row0 + x.row(i);
    if (r >= rows) continue;
    float v[x.kElems];
    x.values(i, v);
    uint32_t word[2] = {0u, 0u};
#pragma unroll
    for (int e = 0; e < x.kElems; ++e) word[e / 4] |= int8_code(value(v[e], e), descale) << (8 * (e % 4));
    *reinterpret_cast<uint2*>(codes + static_cast<int64_t>(r) * D + x.col) = make_uint2(word[0], word[1]);
  }
}

// The head a task of `blocks` blocks per head works on, and its block.
struct HeadBlock {
  int b, h, block;
  __device__ __forceinline__ HeadBlock(int task, int blocks, int heads)
      : b(task / blocks / heads), h(task / blocks % heads), block(task % blocks) {}
  __device__ __forceinline__ int64_t head_index(int heads) const { return static_cast<int64_t>(b) * heads + h; }
};

// Task `task` of a tensor [B, heads, rows, D] (src, strides) quantized per block of kRows: its
// codes in the contiguous [B, heads, rows, D] `codes`, its descale in [B, heads, blocks] `descales`,
// less the head's k_mean row of `mean` [B, heads, D] when kSmooth.
template <class T, int D, int kRows, bool kSmooth>
__device__ __forceinline__ void quantize_task(int task, int blocks, int heads, const void* src, const SdpaTensorStrides& s,
                                              int rows, const float* mean, int8_t* codes, float* descales, float* red) {
  const HeadBlock at(task, blocks, heads);
  const int64_t head = at.head_index(heads);
  quantize_block<T, D, kRows, kSmooth>(sdpa_head_ptr(static_cast<const T*>(src), s, at.b, at.h), s.seq, at.block * kRows,
                                       rows, kSmooth ? mean + head * D : nullptr, codes + head * rows * D,
                                       descales + head * blocks + at.block, red);
}

// The partials of one block of 128 keys, per channel: K's and V's sums (float64, in a fixed order:
// each thread's rows, the lanes of a column by xor butterflies, then the warps in turn) and V's max
// and min over the keys it holds (rows past the end count in the sums as zeros, in neither extreme).
template <int D>
struct KvPartials {
  double k_sum[kQuantizeWarps][D];
  double v_sum[kQuantizeWarps][D];
  float v_max[kQuantizeWarps][D];
  float v_min[kQuantizeWarps][D];
};

template <class T, int D>
__device__ __forceinline__ void reduce_kv_block(const QuantizeArgs& q, int task, KvPartials<D>& part) {
  const SdpaProblem& p = q.a.inputs;
  const HeadBlock at(task, q.k_blocks, p.kv_heads);
  BlockRows<T, D, kKBlock> k, v;
  k.load(sdpa_head_ptr(static_cast<const T*>(p.k), p.k_strides, at.b, at.h), p.k_strides.seq, at.block * kKBlock, p.kv_seq_len);
  v.load(sdpa_head_ptr(static_cast<const T*>(p.v), p.v_strides, at.b, at.h), p.v_strides.seq, at.block * kKBlock, p.kv_seq_len);
  constexpr int kElems = BlockRows<T, D, kKBlock>::kElems, kChunksPerRow = BlockRows<T, D, kKBlock>::kChunksPerRow;
  double ks[kElems] = {}, vs[kElems] = {};
  float hi[kElems], lo[kElems];
#pragma unroll
  for (int e = 0; e < kElems; ++e) hi[e] = -INFINITY, lo[e] = INFINITY;
#pragma unroll
  for (int i = 0; i < k.kPasses; ++i) {
    float kv[kElems], vv[kElems];
    k.values(i, kv);
    v.values(i, vv);
    const bool valid = at.block * kKBlock + v.row(i) < p.kv_seq_len;
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      ks[e] += static_cast<double>(kv[e]);
      vs[e] += static_cast<double>(vv[e]);
      if (valid) hi[e] = fmaxf(hi[e], vv[e]), lo[e] = fminf(lo[e], vv[e]);
    }
  }
#pragma unroll
  for (int e = 0; e < kElems; ++e) {
#pragma unroll
    for (int offset = kChunksPerRow; offset < 32; offset *= 2) {
      ks[e] += __shfl_xor_sync(0xffffffffu, ks[e], offset);
      vs[e] += __shfl_xor_sync(0xffffffffu, vs[e], offset);
      hi[e] = fmaxf(hi[e], __shfl_xor_sync(0xffffffffu, hi[e], offset));
      lo[e] = fminf(lo[e], __shfl_xor_sync(0xffffffffu, lo[e], offset));
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane < kChunksPerRow) {
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      part.k_sum[warp][k.col + e] = ks[e];
      part.v_sum[warp][k.col + e] = vs[e];
      part.v_max[warp][k.col + e] = hi[e];
      part.v_min[warp][k.col + e] = lo[e];
    }
  }
  __syncthreads();
  if (threadIdx.x < D) {
    const int c = threadIdx.x;
    double k_total = part.k_sum[0][c], v_total = part.v_sum[0][c];
    float v_hi = part.v_max[0][c], v_lo = part.v_min[0][c];
#pragma unroll
    for (int w = 1; w < kQuantizeWarps; ++w) {
      k_total += part.k_sum[w][c];
      v_total += part.v_sum[w][c];
      v_hi = fmaxf(v_hi, part.v_max[w][c]);
      v_lo = fminf(v_lo, part.v_min[w][c]);
    }
    const int64_t at_partial = (at.head_index(p.kv_heads) * q.k_blocks + at.block) * D + c;
    q.k_sum[at_partial] = k_total;
    q.v_sum[at_partial] = v_total;
    q.v_max[at_partial] = v_hi;
    q.v_min[at_partial] = v_lo;
  }
}

// Launch 1: tasks [0, q_tasks) quantize a block of 64 Q rows; the rest reduce a block of 128 keys.
template <int D, class T>
__global__ void __launch_bounds__(kQuantizeThreads) int8_stats_kernel(const QuantizeArgs q) {
  __shared__ KvPartials<D> part;
  const SdpaProblem& p = q.a.inputs;
  const int task = blockIdx.x;
  if (task < q.q_tasks) {
    quantize_task<T, D, kQBlock, false>(task, q.q_blocks, p.heads, p.q, p.q_strides, p.seq_len, nullptr, q.a.q8,
                                        q.a.q_descale, &part.v_max[0][0]);
  } else {
    reduce_kv_block<T, D>(q, task - q.q_tasks, part);
  }
}

// Launch 2: per (batch, kv head), thread d: K's and V's means and V's descale of channel d, the
// blocks' partials summed in block order. The largest |V - v_mean| in float32 as torch takes it:
// x -> fl(x - mean) is monotone, so it is at V's max or min (the mean lies between them).
template <int D>
__global__ void __launch_bounds__(D) int8_finalize_kernel(const QuantizeArgs q) {
  const int64_t head = blockIdx.x, d = threadIdx.x, first = head * q.k_blocks * D + d;
  double k_total = 0.0, v_total = 0.0;
  float v_hi = -INFINITY, v_lo = INFINITY;
  for (int block = 0; block < q.k_blocks; ++block) {
    const int64_t at = first + block * D;
    k_total += q.k_sum[at];
    v_total += q.v_sum[at];
    v_hi = fmaxf(v_hi, q.v_max[at]);
    v_lo = fminf(v_lo, q.v_min[at]);
  }
  const double keys = static_cast<double>(q.a.inputs.kv_seq_len);
  const float v_mean = static_cast<float>(v_total / keys);
  q.a.k_mean[head * D + d] = static_cast<float>(k_total / keys);
  q.a.v_mean[head * D + d] = v_mean;
  q.a.v_descale[head * D + d] = amax_descale(fmaxf(__fsub_rn(v_hi, v_mean), __fsub_rn(v_mean, v_lo)), kE4m3Max);
}

// V's block of 128 keys into Vt's 128 columns. A unit is 4 keys x 8 channels (four 16-byte loads;
// a warp's 32 units are 8 key quads x 4 chunks, 64 bytes of each of 8 rows): scaled, converted to
// e4m3 and stored as one word (4 keys) per channel at words[d][quad]; the odd pitch puts a warp's
// 32 stores and 32 loads in 32 banks. Then each thread reads 16 keys of one channel (4 words) and
// writes Vt's 16 columns: column 4w + j of the 16 holds key fp8_key_of(4w + j), i.e. keys 2w,
// 2w + 1, 8 + 2w, 9 + 2w: bytes of words w / 2 and 2 + w / 2 (__byte_perm).
template <class T, int D>
__device__ __forceinline__ void transpose_v_block(const QuantizeArgs& q, int task, uint32_t* words) {
  const SdpaProblem& p = q.a.inputs;
  const HeadBlock at(task, q.k_blocks, p.kv_heads);
  const int64_t head = at.head_index(p.kv_heads);
  const T* v = sdpa_head_ptr(static_cast<const T*>(p.v), p.v_strides, at.b, at.h);
  const float* v_descale = q.a.v_descale + head * D;
  const float* v_mean = q.a.v_mean + head * D;
  const int key0 = at.block * kKBlock;
  constexpr int kQuads = kKBlock / 4, kUnits = kQuads * D / 8;
  static_assert(kUnits % kQuantizeThreads == 0 && kQuads % 8 == 0 && D % 32 == 0, "whole warps of 8 quads x 4 chunks");
#pragma unroll
  for (int i = 0; i < kUnits / kQuantizeThreads; ++i) {
    const int u = threadIdx.x + i * kQuantizeThreads, lane = u % 32, warp_unit = u / 32;
    const int quad = (warp_unit % (kQuads / 8)) * 8 + lane % 8, c = (warp_unit / (kQuads / 8)) * 4 + lane / 8;
    float descale[8], mean[8];
    load_floats8(v_descale + 8 * c, descale);
    load_floats8(v_mean + 8 * c, mean);
    SdpaVec16 rows[4];  // all four loads issued (as BlockRows::load); keys past the end become 0 below
#pragma unroll
    for (int j = 0; j < 4; ++j)
      rows[j] = *reinterpret_cast<const SdpaVec16*>(v + min(key0 + 4 * quad + j, p.kv_seq_len - 1) * p.v_strides.seq + 8 * c);
    uint32_t pairs[2][8];
    // V - v_mean in float32 as torch subtracts it; a key past the end is 0, not its copy less the
    // mean (Vt's padding is zeros).
    const auto smoothed = [&](float x, int j, int e) {
      return key0 + 4 * quad + j < p.kv_seq_len ? __fsub_rn(x, mean[e]) : 0.0f;
    };
#pragma unroll
    for (int j = 0; j < 4; j += 2) {
      float x0[8], x1[8];
      sdpa_vec_to_float<T>(rows[j], x0);
      sdpa_vec_to_float<T>(rows[j + 1], x1);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        pairs[j / 2][e] = pack_e4m3x2(__fdiv_rn(smoothed(x0[e], j, e), descale[e]),
                                      __fdiv_rn(smoothed(x1[e], j + 1, e), descale[e]));
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) words[(8 * c + e) * kVtWordsPitch + quad] = pairs[0][e] | (pairs[1][e] << 16);
  }
  __syncthreads();
  const int64_t vt_row = q.a.vt_key_stride;
  constexpr int kColumnChunks = kKBlock / 16;
  static_assert(D * kColumnChunks % kQuantizeThreads == 0, "whole 16-column chunks per thread");
#pragma unroll
  for (int i = 0; i < D * kColumnChunks / kQuantizeThreads; ++i) {
    const int o = threadIdx.x + i * kQuantizeThreads, m = o % kColumnChunks, d = o / kColumnChunks;
    if (key0 + 16 * m >= vt_row) continue;
    const uint32_t* in = words + d * kVtWordsPitch + 4 * m;
    uint4 out;
    out.x = __byte_perm(in[0], in[2], 0x5410);
    out.y = __byte_perm(in[0], in[2], 0x7632);
    out.z = __byte_perm(in[1], in[3], 0x5410);
    out.w = __byte_perm(in[1], in[3], 0x7632);
    *reinterpret_cast<uint4*>(static_cast<uint8_t*>(q.a.vt) + (head * D + d) * vt_row + key0 + 16 * m) = out;
  }
}

// Launch 3: tasks [0, kv_tasks) quantize a block of 128 keys of K - k_mean; the rest write Vt's of V - v_mean.
template <int D, class T>
__global__ void __launch_bounds__(kQuantizeThreads) int8_kv_kernel(const QuantizeArgs q) {
  __shared__ uint32_t words[D * kVtWordsPitch];
  const SdpaProblem& p = q.a.inputs;
  const int task = blockIdx.x;
  if (task < q.kv_tasks) {
    quantize_task<T, D, kKBlock, true>(task, q.k_blocks, p.kv_heads, p.k, p.k_strides, p.kv_seq_len, q.a.k_mean, q.a.k8,
                                       q.a.k_descale, reinterpret_cast<float*>(words));
  } else {
    transpose_v_block<T, D>(q, task - q.kv_tasks, words);
  }
}

}  // namespace sdpa_int8
