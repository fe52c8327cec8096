// The one torch binding shared by every sdpa stage. It converts tensors to an
// SdpaProblem and calls the stage's extern "C" launcher; shape and dtype
// validation with friendly messages lives in stagelab.sdpa (Python), these
// TORCH_CHECKs are only the backstop for direct callers.
//
// The stream arrives as an integer (torch.cuda.current_stream().cuda_stream)
// so the binding needs no c10_cuda symbols and links against any torch build.
#include <torch/extension.h>

#include "sdpa_api.h"

namespace {

SdpaTensorStrides strides_of(const torch::Tensor& t) {
  return SdpaTensorStrides{t.stride(0), t.stride(1), t.stride(2)};
}

void forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
             const torch::Tensor& out, double softmax_scale, bool causal, int64_t stream) {
  for (const torch::Tensor* t : {&q, &k, &v, &out}) {
    TORCH_CHECK(t->is_cuda(), "sdpa: all tensors must be on a CUDA device");
    TORCH_CHECK(t->dim() == 4, "sdpa: tensors must be [batch, heads, seq, head_dim]");
    TORCH_CHECK(t->stride(3) == 1, "sdpa: head_dim must be contiguous");
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "sdpa: all tensors must share a dtype");
    TORCH_CHECK(t->sizes() == q.sizes(), "sdpa: all tensors must share a shape");
  }
  int32_t dtype;
  if (q.scalar_type() == torch::kFloat16) {
    dtype = kSdpaFloat16;
  } else if (q.scalar_type() == torch::kBFloat16) {
    dtype = kSdpaBFloat16;
  } else {
    TORCH_CHECK(false, "sdpa: dtype must be float16 or bfloat16");
  }
  SdpaProblem problem{};
  problem.q = q.data_ptr();
  problem.k = k.data_ptr();
  problem.v = v.data_ptr();
  problem.out = out.data_ptr();
  problem.q_strides = strides_of(q);
  problem.k_strides = strides_of(k);
  problem.v_strides = strides_of(v);
  problem.out_strides = strides_of(out);
  problem.batch = static_cast<int32_t>(q.size(0));
  problem.heads = static_cast<int32_t>(q.size(1));
  problem.seq_len = static_cast<int32_t>(q.size(2));
  problem.head_dim = static_cast<int32_t>(q.size(3));
  problem.softmax_scale = static_cast<float>(softmax_scale);
  problem.causal = causal ? 1 : 0;
  problem.dtype = dtype;
  cudaError_t status = sdpa_forward(&problem, reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "sdpa kernel launch failed: ", cudaGetErrorString(status));
}

std::string stage_config() { return std::string(sdpa_stage_config()); }

int64_t dynamic_shared_memory_bytes(int64_t head_dim, int64_t dtype) {
  return sdpa_dynamic_shared_memory_bytes(static_cast<int32_t>(head_dim), static_cast<int32_t>(dtype));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "SDPA forward into a preallocated output",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
        py::arg("softmax_scale"), py::arg("causal"), py::arg("stream"));
  m.def("stage_config", &stage_config, "the stage's compile-time configuration");
  m.def("dynamic_shared_memory_bytes", &dynamic_shared_memory_bytes,
        "launch-time shared memory for (head_dim, dtype: 0 fp16, 1 bf16)",
        py::arg("head_dim"), py::arg("dtype"));
}
