// The torch binding shared by every silu stage, compiled once for the family: tensors in,
// the stage's extern "C" launcher called. The stream arrives as an integer, so no c10_cuda symbols.
#include <torch/extension.h>

#include <cuda_runtime.h>

extern "C" cudaError_t family_forward(const void* x, void* out, int64_t elements, int32_t dtype, cudaStream_t stream);
extern "C" const char* family_stage_config();

namespace {

void forward(const torch::Tensor& x, const torch::Tensor& out, int64_t stream) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "silu: tensors must be on a CUDA device");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(), "silu: tensors must be contiguous");
  TORCH_CHECK(x.sizes() == out.sizes() && x.scalar_type() == out.scalar_type(), "silu: x and out differ");
  int32_t dtype = x.scalar_type() == torch::kFloat16 ? 0 : x.scalar_type() == torch::kBFloat16 ? 1 : -1;
  TORCH_CHECK(dtype >= 0, "silu: dtype must be float16 or bfloat16");
  cudaError_t status = family_forward(x.data_ptr(), out.data_ptr(), x.numel(), dtype,
                                      reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "silu launch failed: ", cudaGetErrorString(status));
}

std::string stage_config() { return std::string(family_stage_config()); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "out = f(x)", py::arg("x"), py::arg("out"), py::arg("stream"));
  m.def("stage_config", &stage_config, "the stage's compile-time configuration");
}
