// sdpa_tma.cuh -- Hopper (sm_90) bulk tensor copies, mbarriers and register
// reallocation for the warp-specialized attention stages (s6 and later).
//
// One thin wrapper per PTX instruction (as sdpa_wgmma.cuh does for wgmma):
//
//   mbarrier.init.shared::cta.b64                  a barrier expecting `count` arrivals
//   fence.mbarrier_init.release.cluster            make the inits visible to the copy engine
//   mbarrier.arrive.expect_tx.shared::cta.b64      arrive + announce the bytes a copy will land
//   mbarrier.arrive.shared::cta.b64                plain arrival (a consumer frees a buffer)
//   mbarrier.arrive.release.cluster.shared::cluster.b64  the same on a peer CTA's barrier
//   mbarrier.try_wait.parity.shared::cta.b64       wait for the phase of a given parity
//   cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes[.multicast::cluster]
//                                                  one TMA box global -> shared, completing
//                                                  on an mbarrier (in every CTA of a mask)
//   prefetch.tensormap                             pull a tensor map into the descriptor cache
//   setmaxnreg.{inc,dec}.sync.aligned.u32          re-split the register file by warpgroup
//   griddepcontrol.{wait,launch_dependents}       programmatic dependent launch (PDL): wait for
//                                                  the grids this one depends on; let the next
//                                                  launch's blocks start their prologue
//   %cluster_ctarank, barrier.cluster.{arrive.release,wait.acquire}, mapa.shared::cluster,
//   ld.shared::cluster.v4.f32                      a thread-block cluster's CTAs read each
//                                                  other's shared memory (split-KV combine)
//
// Why our own wrappers and not CuTe's atoms: the stages already speak raw PTX
// (sdpa_mma.cuh, sdpa_wgmma.cuh), the layouts are fixed (SW128, 64-element
// column blocks) and a dozen one-line wrappers keep every instruction visible
// next to the SASS it becomes (UTMALDG, SYNCS.*, USETMAXREG). The kernels/sdpa
// README says the same.
//
// Phases. An mbarrier completes a phase when its pending arrivals reach zero
// and its expected transaction bytes have landed; phases alternate parity
// 0, 1, 0, ... A ring of kStages buffers uses buffer n % kStages for tile n,
// in phase (n / kStages) & 1. A consumer waits on "full" with that parity; the
// producer waits on "empty" with the opposite parity, which a fresh barrier
// reports as already complete, so the first kStages tiles need no release.
//
// Host side: sdpa_encode_tensor_map() builds the 4-D tensor map of a
// [batch, heads, seq, head_dim] tensor with element strides, boxes of 64
// elements (128 bytes, the most a 128-byte swizzle takes) by kRows rows,
// through the driver's cuTensorMapEncodeTiled reached via the runtime (no
// -lcuda link).
#pragma once

#include <cstdint>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "sdpa_api.h"
#include "sdpa_stress.cuh"

namespace sdpa_tma {

// ---------------------------------------------------------------- mbarrier --
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// The copy engine (async proxy) reads the barrier: publish the inits to it.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// A consumer's slot release (STRESS_SIDE=2 delays it: sdpa_stress.cuh).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  sdpa_stress::delay<sdpa_stress::kConsumer>();
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// An arrival on a barrier of another CTA of the cluster (`cluster_addr` from map_to_rank): a
// consumer frees a slot that the peer's producer refills by multicast (release at cluster scope
// orders this CTA's reads of the slot before the peer's overwrite).
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t cluster_addr) {
  sdpa_stress::delay<sdpa_stress::kConsumer>();
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
__device__ __forceinline__ bool mbarrier_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// try_wait suspends the thread for a while before it gives up, but the hardware's own limit is
// short: ncu counted ~130 turns of this loop per key-tile wait in s9's producer warp (log v12),
// issue slots its sub-partition's consumer warps could have used; a longer suspend
// (try_wait's suspendTimeHint) measured no faster (s9's trials).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}

// --------------------------------------------------------------- TMA copies --
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// One box of a 4-D tensor map at coordinates (c0 innermost .. c3) into shared
// memory at `dst`; completes `bytes` of transaction on `bar`. Rows past the
// tensor's end arrive as zeros and still count toward the box's bytes.
// STRESS_SIDE=1 delays each issue, STRESS_POISON=1 poisons its destination (sdpa_stress.cuh).
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  sdpa_stress::delay<sdpa_stress::kProducer>();
  sdpa_stress::poison_destination(dst);
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// The same box multicast to every CTA of the cluster in `cta_mask`: it lands at
// `dst` in each of them and completes `bytes` on the barrier at `bar` in each
// (both addresses this CTA's, the same offsets in every destination).
__device__ __forceinline__ void tma_load_4d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0,
                                                      int c1, int c2, int c3, uint16_t cta_mask) {
  sdpa_stress::delay<sdpa_stress::kProducer>();
  sdpa_stress::poison_destination(dst);  // here, the rows this CTA issues; the peer poisons its own
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "h"(cta_mask)
      : "memory");
}

// ------------------------------------------ programmatic dependent launch --
// A launch with cudaLaunchAttributeProgrammaticStreamSerialization may start
// before the previous kernel in its stream has finished: once every block of
// that kernel has run launch_dependents (or exited), this grid's blocks are
// scheduled as resources free up. Nothing of the previous grid's memory is
// visible before grid_dependency_wait returns, and our writes must not land
// before it returns either (the previous kernel may still read our output
// buffer), so every global access of a PDL kernel comes after the wait.
// Without a programmatic dependency both are no-ops.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void grid_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// ------------------------------------------------------ register re-split --
// Takes effect only when the kernel has a register cap at entry
// (__launch_bounds__(threads, 1)) and every warp of a warpgroup runs it.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes 24..256 in steps of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes 24..256 in steps of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// ---------------------------------------------------------------- clusters --
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// Every thread of every CTA of the cluster; release/acquire orders the shared
// memory writes before the barrier with the peers' reads after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The shared::cluster address of `smem_addr` (this CTA's shared window) in CTA `rank`.
__device__ __forceinline__ uint32_t map_to_rank(uint32_t smem_addr, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem_addr), "r"(rank));
  return out;
}
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t cluster_addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_addr)
               : "memory");
  return v;
}

// ------------------------------------------------------- host: tensor maps --
// TMA addresses global memory in 16-byte units: the base and every stride
// (bytes) must be multiples of 16, strides below 2^40.
constexpr uint64_t kTmaAlignBytes = 16;
constexpr uint64_t kTmaMaxStrideBytes = 1ull << 40;
constexpr uint32_t kBoxInnerElems = 64;  // 128 bytes of 16-bit elements: the SW128 row

inline bool tma_addressable(const void* base, const SdpaTensorStrides& s, uint64_t elem_bytes) {
  const uint64_t strides[] = {static_cast<uint64_t>(s.seq) * elem_bytes, static_cast<uint64_t>(s.head) * elem_bytes,
                              static_cast<uint64_t>(s.batch) * elem_bytes};
  if (reinterpret_cast<uintptr_t>(base) % kTmaAlignBytes != 0) return false;
  for (uint64_t stride : strides) {
    if (stride % kTmaAlignBytes != 0 || stride >= kTmaMaxStrideBytes) return false;
  }
  return true;
}

// The driver entry point, looked up once through the runtime.
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
    constexpr unsigned int kFirstVersionWithTma = 12000;  // CUDA 12.0 introduced the entry point
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, kFirstVersionWithTma, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

// Tensor map of [batch, heads, rows, head_dim] (16-bit elements) with boxes of
// 64 x box_rows, 128-byte swizzled in shared memory, zero fill past the ends.
// K and V pass (kv_heads, kv_seq_len); the overload below is Q's (heads, seq_len).
inline cudaError_t encode_tensor_map(CUtensorMap* map, const void* base, const SdpaTensorStrides& s,
                                     const SdpaProblem& p, CUtensorMapDataType dtype, uint32_t box_rows,
                                     int32_t heads, int32_t rows) {
  constexpr uint64_t kElemBytes = 2;
  if (!tma_addressable(base, s, kElemBytes)) return cudaErrorInvalidValue;
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled_fn();
  if (encode == nullptr) return cudaErrorNotSupported;
  constexpr cuuint32_t kRank = 4;
  const cuuint64_t dims[kRank] = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(rows),
                                  static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(p.batch)};
  // Strides of dims 1..3 in bytes (dim 0 is contiguous by the API's contract).
  const cuuint64_t strides[kRank - 1] = {static_cast<cuuint64_t>(s.seq) * kElemBytes,
                                         static_cast<cuuint64_t>(s.head) * kElemBytes,
                                         static_cast<cuuint64_t>(s.batch) * kElemBytes};
  const cuuint32_t box[kRank] = {kBoxInnerElems, box_rows, 1, 1};
  const cuuint32_t elem_strides[kRank] = {1, 1, 1, 1};
  const CUresult res = encode(map, dtype, kRank, const_cast<void*>(base), dims, strides, box, elem_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return res == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t encode_tensor_map(CUtensorMap* map, const void* base, const SdpaTensorStrides& s,
                                     const SdpaProblem& p, CUtensorMapDataType dtype, uint32_t box_rows) {
  return encode_tensor_map(map, base, s, p, dtype, box_rows, p.heads, p.seq_len);
}

// Tensor map of a 4-D byte tensor (the 8-bit stages' operands) (dims innermost first, strides in bytes for
// dims 1..3) with boxes of box[0] x box[1] bytes, swizzled by box[0] (64 or 128).
inline cudaError_t encode_u8_map(CUtensorMap* map, const void* base, const cuuint64_t (&dims)[4],
                                 const cuuint64_t (&strides)[3], const cuuint32_t (&box)[4]) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled_fn();
  if (encode == nullptr) return cudaErrorNotSupported;
  constexpr cuuint32_t kRank = 4;
  const cuuint32_t elem_strides[kRank] = {1, 1, 1, 1};
  const CUtensorMapSwizzle swizzle = box[0] == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUresult res = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, kRank, const_cast<void*>(base), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return res == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

inline CUtensorMapDataType tensor_map_dtype(int32_t dtype) {
  return dtype == kSdpaBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}

}  // namespace sdpa_tma
