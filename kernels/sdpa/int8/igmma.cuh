// int8/igmma.cuh -- the 8-bit Q.K^T of the INT8 stage: wgmma m64nNk32 with s8 x s8 operands and
// int32 accumulators, exact (|sum| <= 127 * 127 * head_dim < 2^22, every product and partial sum an
// integer), where e4m3's "f32" accumulator keeps about 22 bits and truncates (issue 28's note).
// Both operands K-major 8-bit tiles (fp8/wgmma8.cuh's descriptors); the P.V on e4m3 is Wgmma8.
#pragma once

#include <cstdint>

#include "../fp8/wgmma8.cuh"

namespace sdpa_wgmma {

// "+r": int32 accumulators (the float wrappers' "+f" would make .f32 registers, which a .s32 wgmma refuses).
#define SDPA_IGMMA_D8(i) "+r"(d[(i)]), "+r"(d[(i) + 1]), "+r"(d[(i) + 2]), "+r"(d[(i) + 3]), \
                         "+r"(d[(i) + 4]), "+r"(d[(i) + 5]), "+r"(d[(i) + 6]), "+r"(d[(i) + 7])

// Igmma<N>::ss(d, desc_a, desc_b, scale_d): D[64xN] (+)= A[64x32] . B[32xN], s8 x s8 -> s32, both from
// shared-memory descriptors; scale_d = 0 overwrites d.
template <int N>
struct Igmma;

template <>
struct Igmma<128> {
  static __device__ __forceinline__ void ss(int32_t (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 " SDPA_WGMMA_N128_REGS ", %64, %65, p;\n}\n"
                 : SDPA_IGMMA_D8(0), SDPA_IGMMA_D8(8), SDPA_IGMMA_D8(16), SDPA_IGMMA_D8(24), SDPA_IGMMA_D8(32),
                   SDPA_IGMMA_D8(40), SDPA_IGMMA_D8(48), SDPA_IGMMA_D8(56)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
};
#undef SDPA_IGMMA_D8

// An int32 score as float, exactly, in two full-rate instructions (I2F runs at a quarter of the
// FP32 rate): for |i| < 2^22 the bits of 1.5 * 2^23 + i are the float 1.5 * 2^23 + i.
constexpr int kExactIntBits = 22;
constexpr int32_t kMagicBits = 0x4B400000;  // 1.5 * 2^23 as float bits
constexpr float kMagic = 12582912.0f;       // 1.5 * 2^23
__device__ __forceinline__ float exact_int_to_float(int32_t i) { return __int_as_float(i + kMagicBits) - kMagic; }

}  // namespace sdpa_wgmma
