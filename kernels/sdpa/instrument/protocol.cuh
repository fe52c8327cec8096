// instrument/protocol.cuh -- the protocol-checking build of the warp-specialized stages (issue 46):
// an instrumentation policy that keeps each ring slot's state as a consumer warpgroup (and the
// producer) see it, and checks every rule of the rings' protocol where it is used. The rings: K and V
// (kStages slots), and Q (kQStages buffers, one per work item in flight), whose buffer also stages
// the item's O for its store: staging O there gives the slot up, as a release does. Compute-sanitizer's
// racecheck does not see the async proxies (TMA, wgmma), and timing perturbations (sdpa_stress.cuh)
// cannot reach an ordering that today's latencies happen to hide; these checks do not depend on timing.
//
//   SDPA_PROTOCOL 0 (default): NoProtocol, whose every hook is empty: no code, the SASS is unchanged.
//                 1: RingProtocol; the first violation of a launch is recorded (sdpa_protocol_report
//                 reads and clears it) and the kernel runs on, so the host can still read the record.
//
// The rules, by name (SdpaProtocolRule):
//   read_before_full       a wgmma reads a slot whose full barrier this thread has not waited for,
//                          for this ring index (this phase)
//   release_before_retire  a slot is released while a wgmma group that read it may still run (its
//                          commit group not yet retired by a wgmma_wait<N>)
//   refill_before_release  the producer loads a slot without first waiting for its release, for this
//                          ring index
//   phase_skipped          a slot's ring indices do not move forward one phase at a time
//   unbalanced_at_exit     at the end a wgmma group is still outstanding, or a landed slot unreleased
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include <cuda_runtime.h>

#ifndef SDPA_PROTOCOL
#define SDPA_PROTOCOL 0
#endif
static_assert(SDPA_PROTOCOL == 0 || SDPA_PROTOCOL == 1, "SDPA_PROTOCOL: 0 (off) or 1 (the checking build)");

enum SdpaProtocolRule : int {
  kProtocolOk = 0,
  kReadBeforeFull,
  kReleaseBeforeRetire,
  kRefillBeforeRelease,
  kPhaseSkipped,
  kUnbalancedAtExit,
};
constexpr const char* kProtocolRuleNames[] = {"ok", "read_before_full", "release_before_retire",
                                              "refill_before_release", "phase_skipped", "unbalanced_at_exit"};
constexpr const char* kProtocolRingNames[] = {"K", "V", "Q"};

// The first violation of a launch: which rule, on which ring, slot and ring index, where.
struct SdpaProtocolViolation {
  int rule, ring, slot, index, block, warpgroup;
};

namespace sdpa_protocol {

// The K and V rings, as the hooks name them (sdpa_warpspec_config.cuh's Ring: full K/V, empty K/V),
// and the Q buffers (full_q_bar, empty_q_bar; their ring index is the block's work item).
constexpr int kRingK = 0, kRingV = 1, kRingQ = 2, kRings = 3;

// Every hook empty: the default build's code is the code without hooks.
struct NoProtocol {
  __device__ __forceinline__ explicit NoProtocol(int = -1) {}
  __device__ __forceinline__ void landed(int, int) {}
  __device__ __forceinline__ void reads(int, int) {}
  __device__ __forceinline__ void commit() {}
  __device__ __forceinline__ void waited(int) {}
  __device__ __forceinline__ void released(int, int) {}
  __device__ __forceinline__ void drained(int, int) {}
  __device__ __forceinline__ void filled(int, int) {}
  __device__ __forceinline__ void finish() {}
};

#if SDPA_PROTOCOL
__device__ SdpaProtocolViolation violation;
__device__ int violated;

// The first violation wins; later ones (often its consequences) are dropped.
__device__ __forceinline__ void report(int rule, int ring, int index, int slot, int warpgroup) {
  if (atomicCAS(&violated, 0, 1) == 0) {
    violation = SdpaProtocolViolation{rule, ring, slot, index, static_cast<int>(blockIdx.x), warpgroup};
    __threadfence();
  }
}

// One consumer warpgroup's (or the producer's) view of the rings, in registers: per ring the last
// ring index whose full barrier it waited for (a warpgroup waits for its slots in ring order), the two
// latest reads by a wgmma with their commit groups (a slot is released at most two reads after its
// own: K after the next S, V after its P.V, an item's Q after the next item's first S when its store
// is deferred), the last index whose release the producer waited for; and the wgmma groups committed
// and retired so far. No array is indexed by a slot at run time, so the checking build keeps its
// registers and its main loop's shape.
template <int kStages, int kQStages>
struct RingProtocol {
  __host__ __device__ static constexpr int depth(int ring) { return ring == kRingQ ? kQStages : kStages; }
  struct Read {
    int index = -1, group = 0;
  };
  int warpgroup = -1;  // -1: the producer
  int landed_index[kRings] = {-1, -1, -1};
  int empty_index[kRings] = {-1, -1, -1};
  Read newer[kRings], older[kRings];
  int committed = 0, retired = 0, outstanding = 0;

  __device__ explicit RingProtocol(int warpgroup_ = -1) : warpgroup(warpgroup_) {}
  __device__ void check(bool ok, int rule, int ring, int index) const {
    if (!ok) report(rule, ring, index, index % depth(ring), warpgroup);
  }
  // Its full barrier waited for: ring indices move forward, never past a whole phase of the ring.
  __device__ void landed(int ring, int index) {
    const int last = landed_index[ring];
    check(last < index && index - last <= depth(ring), kPhaseSkipped, ring, index);
    landed_index[ring] = index;
    if (ring != kRingQ) ++outstanding;  // a split-KV peer never releases its Q: only K/V must balance
  }
  // A wgmma of the next commit group reads the slot: it must have landed, in this phase.
  __device__ void reads(int ring, int index) {
    check(index <= landed_index[ring] && index > landed_index[ring] - depth(ring), kReadBeforeFull, ring, index);
    older[ring] = newer[ring];
    newer[ring] = Read{index, committed};
  }
  __device__ void commit() { ++committed; }
  // wgmma_wait<pending>: every group but the `pending` most recent ones has completed.
  __device__ void waited(int pending) { retired = committed - pending > retired ? committed - pending : retired; }
  // Released (or, for Q, overwritten by O's staging): every wgmma group that read it has retired.
  __device__ void released(int ring, int index) {
    const bool read_late = (newer[ring].index == index && newer[ring].group >= retired) ||
                           (older[ring].index == index && older[ring].group >= retired);
    check(!read_late, kReleaseBeforeRetire, ring, index);
    if (ring != kRingQ) --outstanding;
  }
  // Producer: the wait for the slot's release before loading ring index `index`, then the load.
  __device__ void drained(int ring, int index) { empty_index[ring] = index; }
  // The producer waits for every K/V slot's release, a fresh one included; a Q buffer from its second use.
  __device__ void filled(int ring, int index) {
    const bool fresh_q = ring == kRingQ && index < kQStages;
    check(empty_index[ring] == index || fresh_q, kRefillBeforeRelease, ring, index);
  }
  __device__ void finish() {
    if (warpgroup >= 0) check(retired == committed && outstanding == 0, kUnbalancedAtExit, kRingK, -1);
  }
};

// The first violation since the last call, as one line ("" when none), then cleared; "error: ..."
// where the record cannot be read (a launch left the context broken).
inline std::string take_report() {
  int seen = 0;
  SdpaProtocolViolation v{};
  const int zero = 0;
  if (cudaMemcpyFromSymbol(&seen, violated, sizeof(int)) != cudaSuccess ||
      cudaMemcpyFromSymbol(&v, violation, sizeof(v)) != cudaSuccess ||
      cudaMemcpyToSymbol(violated, &zero, sizeof(int)) != cudaSuccess)
    return std::string("error: ") + cudaGetErrorString(cudaGetLastError());
  if (!seen || v.rule <= kProtocolOk || v.rule > kUnbalancedAtExit) return "";
  const std::string who = v.warpgroup < 0 ? "producer" : "consumer warpgroup " + std::to_string(v.warpgroup);
  const int ring = v.ring >= 0 && v.ring < kRings ? v.ring : 0;
  return std::string("rule ") + kProtocolRuleNames[v.rule] + ", ring " + kProtocolRingNames[ring] +
         ", slot " + std::to_string(v.slot) + ", ring index " + std::to_string(v.index) + ", block " +
         std::to_string(v.block) + ", " + who;
}
#endif

template <int kStages, int kQStages>
#if SDPA_PROTOCOL
using Protocol = RingProtocol<kStages, kQStages>;
#else
using Protocol = NoProtocol;
#endif

}  // namespace sdpa_protocol

#if SDPA_PROTOCOL
// The first violation since the last call, as one line (empty when none), and clears it: the
// protocol-checking build's export (sdpa_api.h's sdpa_protocol_report).
#define SDPA_EXPORT_PROTOCOL_REPORT()                                                            \
  extern "C" int32_t sdpa_protocol_report(char* out, int32_t capacity) {                        \
    return sdpa_copy_text(sdpa_protocol::take_report(), out, capacity);                         \
  }
#else
#define SDPA_EXPORT_PROTOCOL_REPORT()
#endif
