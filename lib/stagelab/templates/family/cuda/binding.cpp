// The torch binding shared by every __FAMILY__ stage, compiled once for the family: tensors in,
// the stage's extern "C" launcher called. The stream arrives as an integer, so no c10_cuda symbols.
// The tensor type and pybind11's caster for it, not torch/extension.h (all of libtorch's C++ API):
// this binding compiled in 19 s instead of 63 on a 2-core machine (2026-11-30), and a family's
// first build waits for it.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <cuda_runtime.h>

extern "C" cudaError_t family_forward(const void* x, void* out, int64_t elements, int32_t dtype, cudaStream_t stream);
extern "C" const char* family_stage_config();

namespace {

void forward(const at::Tensor& x, const at::Tensor& out, int64_t stream) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "__FAMILY__: tensors must be on a CUDA device");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(), "__FAMILY__: tensors must be contiguous");
  TORCH_CHECK(x.sizes() == out.sizes() && x.scalar_type() == out.scalar_type(), "__FAMILY__: x and out differ");
  int32_t dtype = x.scalar_type() == at::kHalf ? 0 : x.scalar_type() == at::kBFloat16 ? 1 : -1;
  TORCH_CHECK(dtype >= 0, "__FAMILY__: dtype must be float16 or bfloat16");
  cudaError_t status = family_forward(x.data_ptr(), out.data_ptr(), x.numel(), dtype,
                                      reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "__FAMILY__ launch failed: ", cudaGetErrorString(status));
}

std::string stage_config() { return std::string(family_stage_config()); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "out = f(x)", py::arg("x"), py::arg("out"), py::arg("stream"));
  m.def("stage_config", &stage_config, "the stage's compile-time configuration");
}
