// The one torch binding shared by every softmax stage: tensors -> SoftmaxProblem -> the
// stage's extern "C" launcher. Friendly validation lives in stagelab.families.softmax
// (Python); these TORCH_CHECKs are only the backstop for direct callers.
//
// The stream arrives as an integer (torch.cuda.current_stream().cuda_stream), so the
// binding needs no c10_cuda symbols and links against any torch build.
#include <torch/extension.h>

#include "softmax_api.h"

namespace {

void forward(const torch::Tensor& x, const torch::Tensor& out, int64_t stream) {
  for (const torch::Tensor* t : {&x, &out}) {
    TORCH_CHECK(t->is_cuda(), "softmax: tensors must be on a CUDA device");
    TORCH_CHECK(t->dim() == 2, "softmax: tensors must be [rows, cols]");
    TORCH_CHECK(t->stride(1) == 1, "softmax: the last dim must be contiguous");
    TORCH_CHECK(t->scalar_type() == x.scalar_type(), "softmax: x and out must share a dtype");
    TORCH_CHECK(t->sizes() == x.sizes(), "softmax: x and out must share a shape");
  }
  int32_t dtype;
  if (x.scalar_type() == torch::kFloat16) {
    dtype = kSoftmaxFloat16;
  } else if (x.scalar_type() == torch::kBFloat16) {
    dtype = kSoftmaxBFloat16;
  } else {
    TORCH_CHECK(false, "softmax: dtype must be float16 or bfloat16");
  }
  TORCH_CHECK(x.size(0) <= INT32_MAX && x.size(1) <= INT32_MAX, "softmax: rows and cols must fit in int32");
  SoftmaxProblem problem{};
  problem.x = x.data_ptr();
  problem.out = out.data_ptr();
  problem.x_row_stride = x.stride(0);
  problem.out_row_stride = out.stride(0);
  problem.rows = static_cast<int32_t>(x.size(0));
  problem.cols = static_cast<int32_t>(x.size(1));
  problem.dtype = dtype;
  cudaError_t status = softmax_forward(&problem, reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "softmax kernel launch failed: ", cudaGetErrorString(status));
}

std::string stage_config() { return std::string(softmax_stage_config()); }

int64_t dynamic_shared_memory_bytes(int64_t cols, int64_t dtype) {
  return softmax_dynamic_shared_memory_bytes(static_cast<int32_t>(cols), static_cast<int32_t>(dtype));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "row softmax into a preallocated output", py::arg("x"), py::arg("out"),
        py::arg("stream"));
  m.def("stage_config", &stage_config, "the stage's compile-time configuration");
  m.def("dynamic_shared_memory_bytes", &dynamic_shared_memory_bytes,
        "launch-time shared memory for (cols, dtype: 0 fp16, 1 bf16)", py::arg("cols"), py::arg("dtype"));
}
