// sdpa_timeline.cu -- where one launch of a warp-specialized sdpa stage spends
// its time, block by block: the stage built with -DWS_TIMELINE=1
// (kernels/sdpa/sdpa_timeline.cuh), `launches` back-to-back launches captured
// in one CUDA graph (the throughput mode's recipe), each with its own output,
// and every block's phase stamps written as CSV for tools/timeline_report.py.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DWS_TIMELINE=1 \
//        -DSTAGE_SOURCE='"s18_three_turns.cu"' -I kernels/sdpa \
//        -o /tmp/sdpa_timeline tools/microbench/sdpa_timeline.cu
//   /tmp/sdpa_timeline B H S D [causal=0] [launches=20] > timeline.csv
//   python3 tools/timeline_report.py timeline.csv --plot timeline.png
//
// Records are indexed by (launch, block), launch from the output pointer
// (sdpa_timeline.cuh). The graph is replayed untimed first (warm caches, clocks up), then once more
// with the records cleared; the stamped build's time per launch (timed replays,
// stamps included) goes to stderr.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_check.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#ifndef STAGE_SOURCE
#define STAGE_SOURCE "s18_three_turns.cu"
#endif
#include STAGE_SOURCE

// A 16-bit stage exports sdpa_forward; an INT8 stage (s19_int8) exports sdpa_int8_forward and its
// quantizer, which makes the 8-bit operands from the same fp16 inputs (sdpa_api.h); its
// sdpa_forward only refuses, so the INT8 entry decides.
#pragma weak sdpa_forward
#pragma weak sdpa_int8_forward
#pragma weak sdpa_int8_quantize
#pragma weak sdpa_int8_quantize_scratch_bytes

#if !WS_TIMELINE
#error "build with -DWS_TIMELINE=1: the stage's stamps are compiled out otherwise"
#endif

namespace {

// Uniform values in [-1, 1) from a per-element hash: inputs of the usual scale, no host copy.
__global__ void fill_uniform(__half* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = __float2half(static_cast<float>(h & 0xffffu) / 32768.0f - 1.0f);
  }
}

int arg_or(int argc, char** argv, int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; }

// The INT8 stage's problem: its operands made once by its own quantizer from the fp16 q, k, v of `inputs`.
SdpaInt8Problem quantize_int8(const SdpaProblem& inputs, cudaStream_t stream) {
  constexpr int64_t kQBlock = 64, kKBlock = 128, kVtKeyPad = 16;  // sdpa_api.h's blocks and Vt padding
  const int64_t b = inputs.batch, h = inputs.heads, hkv = inputs.kv_heads, sq = inputs.seq_len,
                sk = inputs.kv_seq_len, d = inputs.head_dim;
  const int64_t vt_keys = sdpa_ceil_div<int64_t>(sk, kVtKeyPad) * kVtKeyPad;
  SdpaInt8Quantize args{};
  args.inputs = inputs;
  args.vt_key_stride = vt_keys;
  CHECK(cudaMalloc(&args.q8, b * h * sq * d));
  CHECK(cudaMalloc(&args.k8, b * hkv * sk * d));
  CHECK(cudaMalloc(&args.vt, b * hkv * d * vt_keys));
  CHECK(cudaMalloc(&args.q_descale, sizeof(float) * b * h * sdpa_ceil_div<int64_t>(sq, kQBlock)));
  CHECK(cudaMalloc(&args.k_descale, sizeof(float) * b * hkv * sdpa_ceil_div<int64_t>(sk, kKBlock)));
  CHECK(cudaMalloc(&args.k_mean, sizeof(float) * b * hkv * d));
  CHECK(cudaMalloc(&args.v_descale, sizeof(float) * b * hkv * d));
  CHECK(cudaMalloc(&args.v_mean, sizeof(float) * b * hkv * d));
  const int64_t scratch_bytes = sdpa_int8_quantize_scratch_bytes(&args);
  void* scratch = nullptr;
  CHECK(cudaMalloc(&scratch, scratch_bytes > 0 ? scratch_bytes : 1));
  CHECK(sdpa_int8_quantize(&args, scratch, scratch_bytes, stream));
  CHECK(cudaStreamSynchronize(stream));
  SdpaInt8Problem problem{};
  problem.attn = inputs;
  problem.attn.q = args.q8;
  problem.attn.k = args.k8;
  problem.attn.v = args.vt;
  problem.q_descale = args.q_descale;
  problem.k_descale = args.k_descale;
  problem.v_descale = args.v_descale;
  problem.v_mean = args.v_mean;
  problem.vt_key_stride = vt_keys;
  return problem;
}

// One launch of the stage, 16-bit or INT8 (its operands made beforehand).
cudaError_t forward(const SdpaProblem& problem, const SdpaInt8Problem* int8, cudaStream_t stream) {
  if (int8 == nullptr) return sdpa_forward(&problem, stream);
  SdpaInt8Problem p = *int8;
  p.attn.out = problem.out;
  return sdpa_int8_forward(&p, stream);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s B H S D [causal=0] [launches=20]\n", argv[0]);
    return 2;
  }
  const int batch = std::atoi(argv[1]), heads = std::atoi(argv[2]), seq = std::atoi(argv[3]),
            head_dim = std::atoi(argv[4]);
  const int causal = arg_or(argc, argv, 5, 0), launches = arg_or(argc, argv, 6, 20);
  const size_t elems = size_t(batch) * heads * seq * head_dim;
  if (launches < 1 || launches > sdpa_timeline::kMaxLaunches ||
      elems * sizeof(__half) > (size_t(1) << sdpa_timeline::kSlotShift)) {
    std::fprintf(stderr, "1..%d launches, each output at most 2^%d bytes\n", sdpa_timeline::kMaxLaunches,
                 sdpa_timeline::kSlotShift);
    return 2;
  }
  __half *q, *k, *v;
  CHECK(cudaMalloc(&q, elems * sizeof(__half)));
  CHECK(cudaMalloc(&k, elems * sizeof(__half)));
  CHECK(cudaMalloc(&v, elems * sizeof(__half)));
  // Launch i's output starts the i-th 2^kSlotShift-aligned window after the first, so the
  // launches' slot bits differ (sdpa_timeline.cuh): one window of slack to align, one per launch.
  const size_t window = size_t(1) << sdpa_timeline::kSlotShift;
  char* arena = nullptr;
  CHECK(cudaMalloc(&arena, window * (launches + 1)));
  const auto arena_addr = reinterpret_cast<unsigned long long>(arena);
  __half* out = reinterpret_cast<__half*>((arena_addr + window - 1) & ~static_cast<unsigned long long>(window - 1));
  const size_t out_stride = window / sizeof(__half);  // elements between launches' outputs
  fill_uniform<<<1024, 256>>>(q, elems, 1u);
  fill_uniform<<<1024, 256>>>(k, elems, 2u);
  fill_uniform<<<1024, 256>>>(v, elems, 3u);
  CHECK(cudaDeviceSynchronize());

  const SdpaTensorStrides strides{int64_t(heads) * seq * head_dim, int64_t(seq) * head_dim, head_dim};
  std::vector<SdpaProblem> problems(launches);
  for (int i = 0; i < launches; ++i) {
    problems[i] = SdpaProblem{q,       k,       v,     out + out_stride * i, strides, strides, strides, strides,
                              batch,   heads,   seq,   head_dim,        1.0f / std::sqrt(float(head_dim)),
                              causal,  kSdpaFloat16, heads, seq};
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (sdpa_forward == nullptr && sdpa_int8_forward == nullptr) {
    std::fprintf(stderr, "%s exports neither sdpa_forward nor sdpa_int8_forward\n", STAGE_SOURCE);
    return 2;
  }
  SdpaInt8Problem int8_problem{};
  const SdpaInt8Problem* int8 = nullptr;
  if (sdpa_int8_forward != nullptr) {
    int8_problem = quantize_int8(problems[0], stream);
    int8 = &int8_problem;
  }
  CHECK(forward(problems[0], int8, stream));  // sets the kernels' shared-memory limits outside the capture
  CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < launches; ++i) CHECK(forward(problems[i], int8, stream));
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));

  constexpr int kWarmReplays = 10;
  for (int r = 0; r < kWarmReplays; ++r) CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  for (int r = 0; r < kWarmReplays; ++r) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  std::fprintf(stderr, "stamped build: %.3f us per launch (%d launches x %d replays)\n",
               1000.0f * ms / (launches * kWarmReplays), launches, kWarmReplays);

  // a phase this config never stamps must read 0, not an earlier replay's value
  void* records_device = nullptr;
  CHECK(cudaGetSymbolAddress(&records_device, sdpa_timeline::g_records));
  CHECK(cudaMemset(records_device, 0, sizeof(sdpa_timeline::Record) * sdpa_timeline::kMaxRecords));
  CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));
  std::vector<sdpa_timeline::Record> all(sdpa_timeline::kMaxRecords);
  CHECK(cudaMemcpyFromSymbol(all.data(), sdpa_timeline::g_records, sizeof(sdpa_timeline::Record) * all.size()));
  std::vector<sdpa_timeline::Record> records;
  for (const auto& r : all)
    if (r.clock[sdpa_timeline::kEntry] != 0) records.push_back(r);
  const unsigned count = static_cast<unsigned>(records.size());
  if (count < static_cast<unsigned>(launches))
    std::fprintf(stderr, "only %u records for %d launches\n", count, launches);

  static const char* const kNames[sdpa_timeline::kPhases] = {
      "entry",      "prologue", "producer_go",   "loads_issued", "consumer_go", "q_landed",
      "k_landed",   "first_tile", "mainloop", "peer_mainloop", "merge_ready", "folded", "stored", "q_issued",
      "item_decoded"};
  std::printf("launch,block,smid");
  for (const char* name : kNames) std::printf(",clk_%s", name);
  std::printf(",ns_entry");
  static const char* const kItemNames[sdpa_timeline::kItemPhases] = {"q_landed", "first_tile", "mainloop", "stored"};
  for (int item = 0; item < sdpa_timeline::kMaxItems; ++item)
    for (const char* name : kItemNames) std::printf(",clk_item%d_%s", item, name);
  static const char* const kTileNames[sdpa_timeline::kTilePhases] = {
      "rescale", "k_wait", "turn_wait", "issue", "s_wait", "softmax", "pv_wait", "pack", "count"};
  for (int wg = 0; wg < sdpa_timeline::kMaxConsumerWGs; ++wg)
    for (const char* name : kTileNames) std::printf(",tile_wg%d_%s", wg, name);
  std::printf("\n");
  const auto base = reinterpret_cast<unsigned long long>(out);
  for (const auto& r : records) {
    std::printf("%llu,%u,%u", (r.out - base) / window, r.block, r.smid);
    for (long long c : r.clock) std::printf(",%lld", c);
    std::printf(",%llu", r.entry_ns);
    for (const auto& item : r.item_clock)
      for (long long c : item) std::printf(",%lld", c);
    for (const auto& wg : r.tile_cycles)
      for (unsigned long long c : wg) std::printf(",%llu", c);
    std::printf("\n");
  }
  std::fprintf(stderr, "%u block records, stage %s\n", count, STAGE_SOURCE);
  return 0;
}
