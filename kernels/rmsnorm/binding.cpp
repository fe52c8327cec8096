// The torch binding of every CUDA rmsnorm stage: tensors -> RmsNormProblem -> the stage's
// extern "C" launcher. The stream arrives as an integer (torch.cuda.current_stream().cuda_stream),
// so the binding needs no c10_cuda symbols and links against any torch build.
#include <torch/extension.h>

#include "rmsnorm_api.h"

namespace {

void forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& out, double eps,
             int64_t stream) {
  for (const torch::Tensor* t : {&x, &weight, &out}) {
    TORCH_CHECK(t->is_cuda(), "rmsnorm: tensors must be on a CUDA device");
    TORCH_CHECK(t->scalar_type() == x.scalar_type(), "rmsnorm: x, weight and out must share a dtype");
    TORCH_CHECK(t->stride(-1) == 1, "rmsnorm: the last dim must be contiguous");
  }
  TORCH_CHECK(x.dim() == 2 && out.sizes() == x.sizes(), "rmsnorm: x and out must be [rows, cols]");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(1), "rmsnorm: weight must be [cols]");
  TORCH_CHECK(x.size(0) <= INT32_MAX && x.size(1) <= INT32_MAX, "rmsnorm: rows and cols must fit in int32");
  TORCH_CHECK(x.scalar_type() == torch::kFloat16 || x.scalar_type() == torch::kBFloat16,
              "rmsnorm: dtype must be float16 or bfloat16");
  RmsNormProblem problem{};
  problem.x = x.data_ptr();
  problem.weight = weight.data_ptr();
  problem.out = out.data_ptr();
  problem.x_row_stride = x.stride(0);
  problem.out_row_stride = out.stride(0);
  problem.rows = static_cast<int32_t>(x.size(0));
  problem.cols = static_cast<int32_t>(x.size(1));
  problem.eps = static_cast<float>(eps);
  problem.dtype = x.scalar_type() == torch::kFloat16 ? kRmsNormFloat16 : kRmsNormBFloat16;
  cudaError_t status = rmsnorm_forward(&problem, reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "rmsnorm kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "RMSNorm of each row into a preallocated output", py::arg("x"), py::arg("weight"),
        py::arg("out"), py::arg("eps"), py::arg("stream"));
  m.def("stage_config", [] { return std::string(rmsnorm_stage_config()); },
        "the stage's compile-time configuration");
}
