// The one ABI every softmax stage exports. Stage sources stay torch-free: raw device
// pointers, element strides and a stream.
//
// Layout: x and out are [rows, cols], row-major, the last dim contiguous; strides in elements.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

enum SoftmaxDtype : int32_t {
  kSoftmaxFloat16 = 0,
  kSoftmaxBFloat16 = 1,
};

struct SoftmaxProblem {
  const void* x;
  void* out;
  int64_t x_row_stride;
  int64_t out_row_stride;
  int32_t rows;
  int32_t cols;
  int32_t dtype;  // SoftmaxDtype
};

// Launches the stage's kernel on `stream`: cudaGetLastError() of the launch, or
// cudaErrorInvalidValue for a problem the stage does not take (Python rejects those first).
extern "C" cudaError_t softmax_forward(const SoftmaxProblem* problem, cudaStream_t stream);

// One line naming the stage's compile-time configuration, logged beside the resource report.
extern "C" const char* softmax_stage_config();

// Launch-time shared memory for (cols, dtype), in bytes; 0 when all of it is static.
extern "C" int64_t softmax_dynamic_shared_memory_bytes(int32_t cols, int32_t dtype);
