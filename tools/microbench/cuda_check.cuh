// cuda_check.cuh -- CHECK(call) for the microbenchmark harnesses: a failed CUDA runtime call
// prints where and why, and exits.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    const cudaError_t err_ = (call);                                                              \
    if (err_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
