// The one torch binding shared by every sdpa stage. It converts tensors to an
// SdpaProblem and calls the stage's extern "C" launcher; shape and dtype
// validation with friendly messages lives in stagelab.sdpa (Python), these
// TORCH_CHECKs are only the backstop for direct callers.
//
// The stream arrives as an integer (torch.cuda.current_stream().cuda_stream)
// so the binding needs no c10_cuda symbols and links against any torch build.
#include <torch/extension.h>

#include "sdpa_api.h"

// FP8 entry points: only FP8 stages define them. Weak references resolve to
// null in every other stage's module, whose fp8_forward then says so.
#pragma weak sdpa_fp8_forward
#pragma weak sdpa_fp8_scratch_bytes
#pragma weak sdpa_int8_forward
#pragma weak sdpa_int8_quantize
#pragma weak sdpa_int8_quantize_scratch_bytes
// Launch plans: only stages that choose among kernel instances per problem define them.
#pragma weak sdpa_launch_plan
#pragma weak sdpa_launch_plans
#pragma weak sdpa_last_launch_plan
#pragma weak sdpa_protocol_report

namespace {

SdpaTensorStrides strides_of(const torch::Tensor& t) {
  return SdpaTensorStrides{t.stride(0), t.stride(1), t.stride(2)};
}

// The ABI's view of Q and O [batch, heads, seq, head_dim] and K, V [batch, kv_heads, kv_seq, head_dim]
// (element strides).
SdpaProblem problem_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& out, double softmax_scale, bool causal, int32_t dtype) {
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
  problem.kv_heads = static_cast<int32_t>(k.size(1));
  problem.kv_seq_len = static_cast<int32_t>(k.size(2));
  return problem;
}

void forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
             const torch::Tensor& out, double softmax_scale, bool causal, int64_t stream) {
  for (const torch::Tensor* t : {&q, &k, &v, &out}) {
    TORCH_CHECK(t->is_cuda(), "sdpa: all tensors must be on a CUDA device");
    TORCH_CHECK(t->dim() == 4, "sdpa: tensors must be [batch, heads, seq, head_dim]");
    TORCH_CHECK(t->stride(3) == 1, "sdpa: head_dim must be contiguous");
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "sdpa: all tensors must share a dtype");
  }
  TORCH_CHECK(out.sizes() == q.sizes(), "sdpa: out must have q's shape");
  TORCH_CHECK(v.sizes() == k.sizes(), "sdpa: k and v must share a shape");
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(3), "sdpa: q, k, v must share batch and head_dim");
  int32_t dtype;
  if (q.scalar_type() == torch::kFloat16) {
    dtype = kSdpaFloat16;
  } else if (q.scalar_type() == torch::kBFloat16) {
    dtype = kSdpaBFloat16;
  } else {
    TORCH_CHECK(false, "sdpa: dtype must be float16 or bfloat16");
  }
  const SdpaProblem problem = problem_of(q, k, v, out, softmax_scale, causal, dtype);
  cudaError_t status = sdpa_forward(&problem, reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "sdpa kernel launch failed: ", cudaGetErrorString(status));
}

// FP8: e4m3 q, k, v with float32 descales [batch, heads] each; out in fp16 or
// bf16 (the unquantized inputs' dtype). The stage's scratch (a transposed V)
// comes from torch's caching allocator on the current device, so it is
// stream-ordered, graph-capturable and never leaks.
void check_fp8_operands(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& out, const std::vector<torch::Tensor>& descales) {
  for (const torch::Tensor* t : {&q, &k, &v, &out}) {
    TORCH_CHECK(t->is_cuda(), "sdpa fp8: all tensors must be on a CUDA device");
    TORCH_CHECK(t->dim() == 4, "sdpa fp8: tensors must be [batch, heads, seq, head_dim]");
    TORCH_CHECK(t->stride(3) == 1, "sdpa fp8: head_dim must be contiguous");
    TORCH_CHECK(t->sizes() == q.sizes(), "sdpa fp8: all tensors must share a shape");
  }
  for (const torch::Tensor* t : {&q, &k, &v})
    TORCH_CHECK(t->scalar_type() == at::kFloat8_e4m3fn, "sdpa fp8: q, k, v must be float8_e4m3fn");
  for (const torch::Tensor& d : descales) {
    TORCH_CHECK(d.is_cuda() && d.scalar_type() == torch::kFloat32 && d.is_contiguous(),
                "sdpa fp8: descales must be contiguous float32 CUDA tensors");
    TORCH_CHECK(d.numel() == q.size(0) * q.size(1), "sdpa fp8: descales must be [batch, heads]");
  }
}

void fp8_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const torch::Tensor& q_descale, const torch::Tensor& k_descale, const torch::Tensor& v_descale,
                 const torch::Tensor& out, double softmax_scale, bool causal, int64_t stream) {
  TORCH_CHECK(sdpa_fp8_forward != nullptr, "sdpa fp8: this stage has no FP8 entry (sdpa_fp8_forward)");
  check_fp8_operands(q, k, v, out, {q_descale, k_descale, v_descale});
  TORCH_CHECK(out.scalar_type() == torch::kFloat16 || out.scalar_type() == torch::kBFloat16,
              "sdpa fp8: out must be float16 or bfloat16");
  SdpaFp8Problem problem{};
  problem.attn = problem_of(q, k, v, out, softmax_scale, causal,
                            out.scalar_type() == torch::kFloat16 ? kSdpaFloat16 : kSdpaBFloat16);
  problem.q_descale = q_descale.data_ptr<float>();
  problem.k_descale = k_descale.data_ptr<float>();
  problem.v_descale = v_descale.data_ptr<float>();
  torch::Tensor scratch;
  const int64_t bytes = sdpa_fp8_scratch_bytes != nullptr ? sdpa_fp8_scratch_bytes(&problem) : 0;
  if (bytes > 0) {
    scratch = torch::empty({bytes}, torch::TensorOptions().dtype(torch::kUInt8).device(q.device()));
    problem.scratch = scratch.data_ptr();
    problem.scratch_bytes = bytes;
  }
  cudaError_t status = sdpa_fp8_forward(&problem, reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "sdpa fp8 kernel launch failed: ", cudaGetErrorString(status));
}

bool has_fp8() { return sdpa_fp8_forward != nullptr; }

// INT8: int8 q [B, H, Sq, D] and k [B, Hkv, Sk, D], e4m3 vt [B, Hkv, D, Sk rounded up to 16] (keys
// permuted per 32), float32 descales per 64 query rows, per 128 keys and per channel, V's float32 mean
// per channel (added to the output); out fp16/bf16.
// stagelab.families.sdpa.int8.kernel validates with friendly messages; these are the backstop.
void int8_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& vt,
                  const torch::Tensor& q_descale, const torch::Tensor& k_descale, const torch::Tensor& v_descale,
                  const torch::Tensor& v_mean, const torch::Tensor& out, double softmax_scale, bool causal,
                  int64_t stream) {
  TORCH_CHECK(sdpa_int8_forward != nullptr, "sdpa int8: this stage has no INT8 entry (sdpa_int8_forward)");
  for (const torch::Tensor* t : {&q, &k, &vt, &out}) {
    TORCH_CHECK(t->is_cuda() && t->dim() == 4 && t->stride(3) == 1,
                "sdpa int8: q, k, vt, out must be 4-D CUDA tensors with a contiguous last dim");
  }
  TORCH_CHECK(q.scalar_type() == torch::kInt8 && k.scalar_type() == torch::kInt8, "sdpa int8: q and k must be int8");
  TORCH_CHECK(vt.scalar_type() == at::kFloat8_e4m3fn && vt.is_contiguous(), "sdpa int8: vt must be contiguous float8_e4m3fn");
  TORCH_CHECK(out.scalar_type() == torch::kFloat16 || out.scalar_type() == torch::kBFloat16,
              "sdpa int8: out must be float16 or bfloat16");
  TORCH_CHECK(out.sizes() == q.sizes(), "sdpa int8: out must have q's shape");
  TORCH_CHECK(vt.size(0) == k.size(0) && vt.size(1) == k.size(1) && vt.size(2) == k.size(3) && vt.size(3) >= k.size(2),
              "sdpa int8: vt must be [batch, kv_heads, head_dim, >= kv_seq_len]");
  for (const torch::Tensor* d : {&q_descale, &k_descale, &v_descale, &v_mean}) {
    TORCH_CHECK(d->is_cuda() && d->scalar_type() == torch::kFloat32 && d->is_contiguous(),
                "sdpa int8: descales and v_mean must be contiguous float32 CUDA tensors");
  }
  TORCH_CHECK(v_mean.sizes() == v_descale.sizes() && v_mean.numel() == k.size(0) * k.size(1) * k.size(3),
              "sdpa int8: v_mean must be [batch, kv_heads, head_dim] as v_descale");
  SdpaInt8Problem problem{};
  problem.attn = problem_of(q, k, k, out, softmax_scale, causal,
                            out.scalar_type() == torch::kFloat16 ? kSdpaFloat16 : kSdpaBFloat16);
  problem.attn.v = vt.data_ptr();
  problem.q_descale = q_descale.data_ptr<float>();
  problem.k_descale = k_descale.data_ptr<float>();
  problem.v_descale = v_descale.data_ptr<float>();
  problem.v_mean = v_mean.data_ptr<float>();
  problem.vt_key_stride = vt.size(3);
  cudaError_t status = sdpa_int8_forward(&problem, reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "sdpa int8 kernel launch failed: ", cudaGetErrorString(status));
}

bool has_int8() { return sdpa_int8_forward != nullptr; }

// The INT8 quantizer (sdpa_api.h SdpaInt8Quantize): fp16/bf16 q [B, H, Sq, D], k and v [B, Hkv, Sk, D]
// (head_dim contiguous) into preallocated contiguous outputs; its scratch (per-block partials) from
// torch's caching allocator, as fp8_forward's. stagelab.families.sdpa.int8.cuda_quantize validates
// with friendly messages (inf or NaN inputs among them); these are the backstop.
constexpr int64_t kInt8QBlock = 64, kInt8KBlock = 128, kVtKeyPad = 16;  // sdpa_api.h's blocks and Vt padding

void check_int8_quantize_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  for (const torch::Tensor* t : {&q, &k, &v}) {
    TORCH_CHECK(t->is_cuda() && t->dim() == 4 && t->stride(3) == 1 && t->scalar_type() == q.scalar_type(),
                "sdpa int8 quantize: q, k, v must be 4-D CUDA tensors of one dtype with a contiguous last dim");
  }
  TORCH_CHECK(q.scalar_type() == torch::kFloat16 || q.scalar_type() == torch::kBFloat16,
              "sdpa int8 quantize: q, k, v must be float16 or bfloat16");
  TORCH_CHECK(v.sizes() == k.sizes() && k.size(0) == q.size(0) && k.size(3) == q.size(3),
              "sdpa int8 quantize: k and v must share a shape, and q, k share batch and head_dim");
}

void check_int8_quantize_output(const torch::Tensor& q, const torch::Tensor& t, at::ScalarType dtype,
                                std::vector<int64_t> shape) {
  TORCH_CHECK(t.is_cuda() && t.get_device() == q.get_device() && t.is_contiguous() && t.sizes() == shape &&
                  t.scalar_type() == dtype,
              "sdpa int8 quantize: every output must be a contiguous tensor of its shape and dtype on q's device "
              "(got ", t.sizes(), " ", t.scalar_type(), ", expected ", c10::IntArrayRef(shape), " ", dtype, ")");
}

void int8_quantize(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& q8,
                   const torch::Tensor& q_descale, const torch::Tensor& k8, const torch::Tensor& k_descale,
                   const torch::Tensor& k_mean, const torch::Tensor& vt, const torch::Tensor& v_descale,
                   const torch::Tensor& v_mean, int64_t stream) {
  TORCH_CHECK(sdpa_int8_quantize != nullptr && sdpa_int8_quantize_scratch_bytes != nullptr,
              "sdpa int8: this stage has no INT8 quantizer (sdpa_int8_quantize)");
  check_int8_quantize_inputs(q, k, v);
  const int64_t b = q.size(0), h = q.size(1), sq = q.size(2), d = q.size(3), hkv = k.size(1), sk = k.size(2);
  check_int8_quantize_output(q, q8, torch::kInt8, {b, h, sq, d});
  check_int8_quantize_output(q, q_descale, torch::kFloat32, {b, h, (sq + kInt8QBlock - 1) / kInt8QBlock});
  check_int8_quantize_output(q, k8, torch::kInt8, {b, hkv, sk, d});
  check_int8_quantize_output(q, k_descale, torch::kFloat32, {b, hkv, (sk + kInt8KBlock - 1) / kInt8KBlock});
  check_int8_quantize_output(q, k_mean, torch::kFloat32, {b, hkv, d});
  check_int8_quantize_output(q, vt, at::kFloat8_e4m3fn, {b, hkv, d, (sk + kVtKeyPad - 1) / kVtKeyPad * kVtKeyPad});
  check_int8_quantize_output(q, v_descale, torch::kFloat32, {b, hkv, d});
  check_int8_quantize_output(q, v_mean, torch::kFloat32, {b, hkv, d});
  SdpaInt8Quantize args{};
  args.inputs = problem_of(q, k, v, q, 1.0, false, q.scalar_type() == torch::kFloat16 ? kSdpaFloat16 : kSdpaBFloat16);
  args.inputs.out = nullptr;  // unused: the quantizer writes the outputs below
  args.q8 = q8.data_ptr<int8_t>();
  args.q_descale = q_descale.data_ptr<float>();
  args.k8 = k8.data_ptr<int8_t>();
  args.k_descale = k_descale.data_ptr<float>();
  args.k_mean = k_mean.data_ptr<float>();
  args.vt = vt.data_ptr();
  args.v_descale = v_descale.data_ptr<float>();
  args.v_mean = v_mean.data_ptr<float>();
  args.vt_key_stride = vt.size(3);
  const int64_t bytes = sdpa_int8_quantize_scratch_bytes(&args);
  torch::Tensor scratch = torch::empty({bytes > 0 ? bytes : 1}, torch::TensorOptions().dtype(torch::kUInt8).device(q.device()));
  cudaError_t status = sdpa_int8_quantize(&args, scratch.data_ptr(), bytes, reinterpret_cast<cudaStream_t>(stream));
  TORCH_CHECK(status == cudaSuccess, "sdpa int8 quantize launch failed: ", cudaGetErrorString(status));
}

bool has_int8_quantize() { return sdpa_int8_quantize != nullptr; }

std::string stage_config() { return std::string(sdpa_stage_config()); }

int64_t dynamic_shared_memory_bytes(int64_t head_dim, int64_t dtype) {
  return sdpa_dynamic_shared_memory_bytes(static_cast<int32_t>(head_dim), static_cast<int32_t>(dtype));
}


// Launch plans (sdpa_api.h): only stages that choose among instances export them.
std::vector<std::string> launch_plans() {
  if (sdpa_launch_plans == nullptr) return {};
  std::string text(static_cast<size_t>(sdpa_launch_plans(nullptr, 0)) + 1, '\0');
  text.resize(static_cast<size_t>(sdpa_launch_plans(text.data(), static_cast<int32_t>(text.size()))));
  std::vector<std::string> plans;
  size_t begin = 0;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1)
    plans.push_back(text.substr(begin, end - begin));
  if (begin < text.size()) plans.push_back(text.substr(begin));
  return plans;
}

// The plan a problem of this shape takes on a device of `sms` SMs and `l2_bytes` of L2, without a GPU:
// the plan reads shapes only, so the problem's tensors are a placeholder address that is never read.
std::string launch_plan(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_len, int64_t kv_seq_len,
                        int64_t head_dim, int64_t dtype, bool causal, bool bshd, int64_t sms, int64_t l2_bytes) {
  if (sdpa_launch_plan == nullptr) return "";
  alignas(16) static const char placeholder[16] = {};
  SdpaProblem problem{};
  problem.q = problem.k = problem.v = placeholder;
  problem.out = const_cast<char*>(placeholder);
  const auto strides = [&](int64_t h, int64_t s) {  // contiguous bhsd, or bshd viewed as bhsd
    return bshd ? SdpaTensorStrides{s * h * head_dim, head_dim, h * head_dim}
                : SdpaTensorStrides{h * s * head_dim, s * head_dim, head_dim};
  };
  problem.q_strides = problem.out_strides = strides(heads, seq_len);
  problem.k_strides = problem.v_strides = strides(kv_heads, kv_seq_len);
  problem.batch = static_cast<int32_t>(batch);
  problem.heads = static_cast<int32_t>(heads);
  problem.seq_len = static_cast<int32_t>(seq_len);
  problem.head_dim = static_cast<int32_t>(head_dim);
  problem.softmax_scale = 1.0f;
  problem.causal = causal ? 1 : 0;
  problem.dtype = static_cast<int32_t>(dtype);
  problem.kv_heads = static_cast<int32_t>(kv_heads);
  problem.kv_seq_len = static_cast<int32_t>(kv_seq_len);
  const SdpaDevice device{static_cast<int32_t>(sms), l2_bytes};
  const int32_t length = sdpa_launch_plan(&problem, &device, nullptr, 0);
  TORCH_CHECK_VALUE(length >= 0, "sdpa: the stage rejects this problem (launch_plan)");
  std::string text(static_cast<size_t>(length) + 1, '\0');
  text.resize(static_cast<size_t>(sdpa_launch_plan(&problem, &device, text.data(), static_cast<int32_t>(text.size()))));
  return text;
}

std::string last_launch_plan() { return sdpa_last_launch_plan != nullptr ? std::string(sdpa_last_launch_plan()) : ""; }
// The protocol-checking build's first violation since the last call ("" when none); None for a build
// without the checks (SDPA_PROTOCOL=0, or a stage that has none).
py::object protocol_report() {
  if (sdpa_protocol_report == nullptr) return py::none();
  std::string text(256, '\0');
  const int32_t length = sdpa_protocol_report(text.data(), static_cast<int32_t>(text.size()));
  TORCH_CHECK(length >= 0, "sdpa_protocol_report: the violation record could not be read (", cudaGetErrorString(cudaGetLastError()), ")");
  text.resize(static_cast<size_t>(length) < text.size() ? static_cast<size_t>(length) : text.size() - 1);
  return py::str(text);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "SDPA forward into a preallocated output",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
        py::arg("softmax_scale"), py::arg("causal"), py::arg("stream"));
  m.def("fp8_forward", &fp8_forward, "FP8 (e4m3) SDPA forward into a preallocated fp16/bf16 output",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("q_descale"), py::arg("k_descale"),
        py::arg("v_descale"), py::arg("out"), py::arg("softmax_scale"), py::arg("causal"), py::arg("stream"));
  m.def("int8_forward", &int8_forward, "INT8 (int8 Q.K^T, e4m3 P.V) SDPA forward into a preallocated fp16/bf16 output",
        py::arg("q"), py::arg("k"), py::arg("vt"), py::arg("q_descale"), py::arg("k_descale"),
        py::arg("v_descale"), py::arg("v_mean"), py::arg("out"), py::arg("softmax_scale"), py::arg("causal"),
        py::arg("stream"));
  m.def("has_int8", &has_int8, "whether the stage exports the INT8 entry point");
  m.def("int8_quantize", &int8_quantize, "the INT8 stage's operands from fp16/bf16 q, k, v into preallocated outputs",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("q8"), py::arg("q_descale"), py::arg("k8"),
        py::arg("k_descale"), py::arg("k_mean"), py::arg("vt"), py::arg("v_descale"), py::arg("v_mean"),
        py::arg("stream"));
  m.def("has_int8_quantize", &has_int8_quantize, "whether the stage exports the INT8 quantizer");
  m.def("launch_plans", &launch_plans, "every launch plan the stage's build can take (empty: one implicit plan)");
  m.def("launch_plan", &launch_plan, "the launch plan a problem of this shape takes on a device of sms SMs and l2_bytes of L2");
  m.def("last_launch_plan", &last_launch_plan, "the plan of this thread's last forward launch");
  m.def("protocol_report", &protocol_report, "the protocol-checking build's first violation since the last call ('' none; None: no checks)");
  m.def("has_fp8", &has_fp8, "whether the stage exports the FP8 entry points");
  m.def("stage_config", &stage_config, "the stage's compile-time configuration");
  m.def("dynamic_shared_memory_bytes", &dynamic_shared_memory_bytes,
        "launch-time shared memory for (head_dim, dtype: 0 fp16, 1 bf16)",
        py::arg("head_dim"), py::arg("dtype"));
}
