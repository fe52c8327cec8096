// The one ABI every sdpa stage exports. Stage sources stay torch-free: they see
// raw device pointers, element strides and a stream, nothing else.
//
// Layout: Q, K, V, O are [batch, heads, seq_len, head_dim] with the last dim
// contiguous (stride 1). Strides are in elements, not bytes.
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
  int32_t seq_len;     // queries and keys share one length (self-attention)
  int32_t head_dim;    // 64 or 128
  float softmax_scale; // applied to Q.K^T before the softmax
  int32_t causal;      // nonzero: key j is visible to query i only when j <= i
  int32_t dtype;       // SdpaDtype
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
