// The ABI every CUDA rmsnorm stage exports; stage sources stay torch-free (binding.cpp holds torch).
//
// Layout: x and out are [rows, cols], the last dim contiguous, row strides in elements;
// weight is [cols], contiguous; all three share one storage dtype.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

enum RmsNormDtype : int32_t {
  kRmsNormFloat16 = 0,
  kRmsNormBFloat16 = 1,
};

struct RmsNormProblem {
  const void* x;
  const void* weight;
  void* out;
  int64_t x_row_stride;
  int64_t out_row_stride;
  int32_t rows;
  int32_t cols;
  float eps;
  int32_t dtype;  // RmsNormDtype
};

// Launches the stage's kernel on `stream`: cudaGetLastError() of the launch, or
// cudaErrorInvalidValue for a problem the stage does not take.
extern "C" cudaError_t rmsnorm_forward(const RmsNormProblem* problem, cudaStream_t stream);

// One line naming the stage's compile-time configuration, logged beside the resource report.
extern "C" const char* rmsnorm_stage_config();
