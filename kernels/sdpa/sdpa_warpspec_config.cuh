// sdpa_warpspec_config.cuh -- the compile-time half of sdpa_warpspec.cuh: the
// register budget, the body policies a Config inherits (conditional O rescale,
// programmatic dependent launch, causal order, softmax order), Config (a stage's policy),
// KeySplit, and the shared-memory Layout. The work order (which items a block
// takes, in which order) is sched/'s; sdpa_warpspec.cuh holds the kernel, and
// sdpa_warpspec_launch.cuh the host side.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_export.cuh"
#include "sdpa_mma.cuh"
#include "sdpa_tma.cuh"
#include "sdpa_wgmma.cuh"
#include "sdpa_wgmma_tile.cuh"
#include "sdpa_timeline.cuh"

namespace sdpa_warpspec {

using namespace sdpa_wgmma;
using namespace sdpa_tma;

constexpr int kWarpSize = 32;
constexpr int kRegisterFile = 64 * 1024;  // 32-bit registers per SM
constexpr int kMaxClusterSplits = 4;      // key-range splits per work item (cluster size)
constexpr int kBarBytes = 8;
constexpr int kMaxTmaBoxRows = 256;       // cuTensorMapEncodeTiled's limit per box dimension
constexpr int kRegGranule = 8;            // setmaxnreg counts are multiples of 8

// Registers a block holds from launch on: every thread gets the cap that
// __launch_bounds__(threads, min_blocks) leaves, rounded down to the granule.
// setmaxnreg only moves registers between a block's own warps: an .inc that
// asks for more than the .dec calls freed waits forever (a 5-warpgroup block
// gets 96 per thread, 61,440 in all, not the register file's 65,536).
constexpr int entry_regs_per_block(int threads, int min_blocks) {
  return kRegisterFile / min_blocks / threads / kRegGranule * kRegGranule * threads;
}
// The most registers each consumer thread may ask of setmaxnreg.inc, at most
// `wanted`: what the block's registers at entry leave per consumer thread once
// its producer warpgroup holds its share, rounded down to the granule. One block
// per SM, producer at 24: 2 warpgroups (168 * 384 - 24 * 128) / 256 = 240;
// 3 warpgroups (128 * 512 - 24 * 128) / 384 = 162 -> 160; 4 (96 * 640 - 24 * 128)
// / 512 = 114 -> 112.
constexpr int fit_consumer_regs(int consumer_wgs, int producer_regs, int min_blocks, int wanted) {
  const int per_block = entry_regs_per_block((1 + consumer_wgs) * kWarpgroupThreads, min_blocks);
  const int fit = (per_block / kWarpgroupThreads - producer_regs) / consumer_wgs / kRegGranule * kRegGranule;
  return wanted < fit ? wanted : fit;
}
// The kernel body's policies a Config inherits (its Body parameter): each names one way the body
// may run, and a stage's composition picks them (PlainBody: s6 and s7; the persistent stages'
// Recipe, sdpa_persistent_recipe.cuh). Every choice is a type member, so the kernel a stage builds is
// fixed by its Config and nothing else.
//
// Programmatic dependent launch (sdpa_tma.cuh): launched with programmatic stream serialization,
// every block waits for the previous grid before its first global access and lets the next launch
// in (launch_dependents), so the next launch's block dispatch and prologue overlap this one's tail.
// kEarlyTrigger: the trigger right after the prologue (the next grid's blocks take any free slot at
// once, beside running blocks); kLateTrigger: after the consumers' first work item's key tiles,
// before its epilogue (they arrive as this grid's blocks finish).
enum class Pdl : int { kOff, kEarlyTrigger, kLateTrigger };
// The order of a consumer's softmax on a key tile whose predecessor's P.V still runs (sdpa_warpspec.cuh's
// middle_tile). kPlain: softmax(), then the P.V's wait below a basic-block boundary, then pack_p(),
// and O's rescale before the next P.V. kInterleaved: FlashAttention-4's order, softmax_interleaved
// in sdpa_wgmma_tile.cuh: a few n8 tiles' exponentials, the wait, O's rescale, and the other
// exponentials with P's packing and the row sums interleaved. kInterleavedD128: that order at
// head_dim 128 only.
enum class SoftmaxOrder : int { kPlain, kInterleaved, kInterleavedD128 };
struct PlainBody {
  static constexpr Pdl kPdl = Pdl::kOff;
  // Conditional O rescale at head_dim 128 (sdpa_wgmma_tile.cuh's kRescaleThreshold, log2 units; 0:
  // every tile). head_dim 64 rescales every tile.
  static constexpr int kRescaleThresholdD128 = 0;
  // Persistent causal blocks: causal pairs (WorkOrder), or, per launch where the host's model says it
  // pays (sched/causal_pairs.cuh), the longest-first snake.
  static constexpr bool kCausalSnake = false;
  static constexpr SoftmaxOrder kSoftmaxOrder = SoftmaxOrder::kPlain;
};
template <class Body>
constexpr bool kPdlOn = Body::kPdl != Pdl::kOff;
template <class Body, int D>
constexpr int kRescaleThresholdOf = D == 64 ? 0 : Body::kRescaleThresholdD128;

struct Params {
  SdpaProblem p;
  CUtensorMap q_map, k_map, v_map;
  int m_tiles;     // query tiles per (batch, head)
  int work_items;  // m_tiles * heads * batch
  int causal_snake;  // Cfg::kCausalSnake: this launch walks the longest-first snake (CausalPairs::plan)
  // Three warpgroups taking turns, non-causal (kMixedTiles): each (batch, head)'s first big_tiles items
  // hold kBlockM rows, its other m_tiles - big_tiles one warpgroup's fewer; turns_snake 1: every
  // big item first, then the short ones, dealt in a snake; 0: stripes, rotated (the host's plan_three_turns).
  int big_tiles;
  int big_items;  // big_tiles * (batch, head)s: where the snake's list turns to the short items
  int turns_snake;
};

// What a kernel's operands are, as the T every part takes (Layout, ConsumerWarpgroup, Epilogue,
// produce, the kernel): a 16-bit stage's T is the element of Q, K, V and O alike; an 8-bit stage's T
// is a tag whose specialization (int8/operands.cuh) names its tile, its operand bytes, its V layout
// and its kernel parameters.
template <typename T>
struct Operands {
  using Out = T;              // O's element
  using KernelParams = Params;
  static constexpr int kQkBytes = sizeof(T);   // bytes per element of Q and K (and V)
  static constexpr bool kVTransposed = false;  // V as it is, [keys][D], read MN-major by the P.V wgmma
  template <int D, int kBlockN, bool kCausal, bool kScalePositive, int kRescaleThreshold>
  using Tile = WgAttentionTile<T, D, kBlockN, kCausal, kScalePositive, kRescaleThreshold>;
};

// The problem as the kernel reads it (sdpa_api.h). Without SDPA_GENERAL_PROBLEM these fold to
// self-attention's values at compile time, so s6-s8 build the code they always did.
// kv_len: the keys; key_offset: query i's position among them (causal aligned bottom-right,
// query i sees key j <= i + key_offset); kv_head: the K/V head query head h reads.
__host__ __device__ __forceinline__ int kv_len(const SdpaProblem& p) {
  return kSdpaGeneralProblem ? p.kv_seq_len : p.seq_len;
}
__host__ __device__ __forceinline__ int key_offset(const SdpaProblem& p) {
  return kSdpaGeneralProblem ? p.kv_seq_len - p.seq_len : 0;
}
__device__ __forceinline__ int kv_head(const SdpaProblem& p, int h) {
  return kSdpaGeneralProblem ? h / (p.heads / p.kv_heads) : h;
}

template <int kConsumerWGs_, int kBlockN_, int kStages_, bool kPingpong_, bool kPersistent_, int kMinBlocks_,
          int kProducerRegs_, int kConsumerRegs_, class Body = PlainBody>
struct Config : Body {
  static constexpr int kConsumerWGs = kConsumerWGs_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kPingpong = kPingpong_;
  static constexpr bool kPersistent = kPersistent_;
  static constexpr int kMinBlocks = kMinBlocks_;  // blocks per SM the register cap at entry allows
  static constexpr int kProducerRegs = kProducerRegs_;
  static constexpr int kConsumerRegs = kConsumerRegs_;
  static constexpr int kThreads = (1 + kConsumerWGs) * kWarpgroupThreads;  // producer first
  static constexpr bool kKeySplit = false;  // KeySplit<Config> below turns it on
  static constexpr int kQStages = 1;        // Q buffers; QRing<Config> below makes it 2
  static constexpr int kMulticastCtas = 1;  // CTAs sharing each K/V tile; KvMulticast<Config> below makes it 2
  static constexpr bool kCausalPairs = true;  // persistent causal: tiles j and m-1-j back to back (WorkOrder)
  static constexpr bool kDeferEpilogue = false;  // DeferEpilogue<Config> below turns it on
  static constexpr int kBlockM = kConsumerWGs * kWgmmaM;
  // Ring indices between a warpgroup's consecutive key tiles, and the warps
  // that consume (and release) each ring slot.
  static constexpr int kRingStride = 1;
  static constexpr int kConsumerThreads = kConsumerWGs * kWarpgroupThreads;
  static constexpr int kConsumerWarps = kConsumerWGs * kWarpgroupWarps;
  static constexpr int kRingReleasers = kConsumerWarps;
  // Three warpgroups (192 rows, FlashAttention-3's head-dim-64 block) leave each
  // consumer 160 registers (fit_consumer_regs): enough at D=64, not at D=128.
  static_assert(kConsumerWGs >= 1 && kConsumerWGs <= 3, "one to three consumer warpgroups (64, 128 or 192 rows)");
  static_assert(kBlockM <= kMaxTmaBoxRows, "Q is loaded as one TMA box of kBlockM rows per column block");
  static_assert(!kPingpong || kConsumerWGs >= 2, "pingpong needs two or three consumer warpgroups");
  static_assert(kStages >= 2, "a buffer is refilled while the other is read: >= 2 per ring");
  static_assert(Body::kRescaleThresholdD128 >= 0 && Body::kRescaleThresholdD128 <= 15,
                "kRescaleThresholdD128: 0 (every tile) to 15 (p < 2^15 keeps fp16's 65504 clear)");
  static_assert(kBlockN == 64 || kBlockN == 128 || kBlockN == 176 || kBlockN == 192,
                "BLOCK_N: 64, 128, 176 or 192 (TMA box rows <= 256, a wgmma N with a wrapper)");
  static_assert(kWarpgroupThreads * (kProducerRegs + kConsumerWGs * kConsumerRegs) <=
                    entry_regs_per_block(kThreads, kMinBlocks),
                "the setmaxnreg split must fit the registers the block holds from launch on (fit_consumer_regs)");
};

// A Config whose two consumer warpgroups split the key tiles of ONE
// 64-row query tile (the header's kKeySplit). A derived type rather than a
// Config parameter, so the other configs' kernels keep their names and code.
template <class Base>
struct KeySplit : Base {
  static constexpr bool kKeySplit = true;
  static constexpr int kBlockM = kWgmmaM;  // both warpgroups on the same rows
  static constexpr int kRingStride = Base::kConsumerWGs;
  static constexpr int kRingReleasers = kWarpgroupWarps;  // only the owning warpgroup consumes a slot
  static_assert(Base::kConsumerWGs == 2, "key split: two warpgroups (one parks its partial, one merges)");
  static_assert(!Base::kPingpong, "key split: no turns (both warpgroups take every other tile of one item)");
  // Ring index i is warpgroup i % kConsumerWGs's from 0 on; a persistent block carries
  // the ring position across items, which would shift that ownership.
  static_assert(!Base::kPersistent, "key split: one work item per block (ring index 0 = warpgroup 0)");
  // Slot i % kStages then always serves the same warpgroup, so a warpgroup's
  // parity wait on a slot never races a phase the other one has not consumed
  // (a wait one phase ahead would pass at once).
  static_assert(Base::kStages % Base::kConsumerWGs == 0, "key split: ring slots divide evenly between warpgroups");
};

// A persistent Config with two Q buffers (s11): work item n's Q lands in buffer n % 2, so the
// producer issues the next item's Q (and its first K/V tiles behind it) while this item's key
// tiles still run, instead of after this item's epilogue has staged O through the one buffer.
// A derived type, as KeySplit, so the other configs' kernels keep their names and code.
template <class Base>
struct QRing : Base {
  static constexpr int kQStages = 2;
  static_assert(Base::kPersistent, "Q ring: only a block that walks several work items has a next Q to load");
};

// A persistent Config that takes causal items one by one (s12): with fewer items than SMs each
// block runs one, and pairing them would halve the blocks that run.
template <class Base>
struct Unpaired : Base {
  static constexpr bool kCausalPairs = false;
  static_assert(Base::kPersistent, "unpaired: causal pairs exist only in a persistent grid");
};

// A persistent Config whose blocks come in thread-block clusters of two that run two query heads
// of one K/V group (heads 2j and 2j + 1, the same query tile) in lockstep (s14): each CTA's
// producer loads half of every K/V tile's rows by TMA multicast into both CTAs, and each CTA's
// consumer warps free a ring slot in both CTAs, so a slot is refilled only once both have read
// it. Each K/V tile then leaves L2 once for two query heads.
template <class Base>
struct KvMulticast : Base {
  static constexpr int kMulticastCtas = 2;
  static_assert(Base::kPersistent, "K/V multicast: a persistent grid of clusters (WorkOrder walks them in lockstep)");
  static_assert(!Base::kKeySplit, "K/V multicast: one query tile per warpgroup");
  static_assert(Base::kBlockN % (kMulticastCtas * 8) == 0, "each CTA's share of a tile is whole 8-row swizzle atoms");
};

// A persistent Config with two Q buffers whose consumers store an item's O only once they have
// issued the next item's first Q.K^T (s15): the normalise, staging and 16-byte stores of O run
// under that wgmma and the other warpgroup's turns instead of between two items, when the tensor
// cores would wait. O's staging buffer is its item's Q buffer, which the next item does not use.
template <class Base>
struct DeferEpilogue : Base {
  static constexpr bool kDeferEpilogue = true;
  static_assert(Base::kQStages == 2, "deferred epilogue: O is staged in its item's Q buffer while the next Q is in use");
  static_assert(!Base::kKeySplit, "deferred epilogue: one query tile per warpgroup");
};

template <typename T, int D, class Cfg>
struct Layout {
  using Ops = Operands<T>;
  static_assert(Ops::kQkBytes == 2 || Ops::kQkBytes == 1, "16- or 8-bit operands");
  // A Q or K row: whole 128-byte swizzle rows (16-bit), or one row of D bytes (8-bit: SW64 or SW128).
  static constexpr int kFullRowBytes = D * Ops::kQkBytes;
  static constexpr int kRowBytes = kFullRowBytes < kSw128RowBytes ? kFullRowBytes : kSw128RowBytes;
  static_assert(kRowBytes == 64 || kRowBytes == 128, "a Q/K row is 64 bytes or whole 128-byte swizzle rows");
  static_assert(kFullRowBytes % kRowBytes == 0, "head_dim is whole TMA boxes / swizzle column blocks");
  static constexpr int kColumnBlocks = kFullRowBytes / kRowBytes;  // TMA boxes per tile
  static constexpr int kQStages = Cfg::kQStages;
  // A Q buffer also stages its item's O (the epilogue), in O's element.
  static constexpr uint32_t kQTileBytes = Cfg::kBlockM * kFullRowBytes;
  static constexpr uint32_t kOTileBytes = Cfg::kBlockM * D * sizeof(typename Ops::Out);
  static constexpr uint32_t kQBytes = kQTileBytes > kOTileBytes ? kQTileBytes : kOTileBytes;
  static constexpr uint32_t kKVBytes = Cfg::kBlockN * kFullRowBytes;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + Cfg::kQStages * kQBytes;
  static constexpr int kVOffset = kKOffset + Cfg::kStages * kKVBytes;
  static constexpr int kBarOffset = kVOffset + Cfg::kStages * kKVBytes;
  // full_q, empty_q, then four rings; a Q ring's second (full_q, empty_q) pair after them
  static constexpr int kBarriers = 2 * Cfg::kQStages + 4 * Cfg::kStages;
  // Key split, past the barriers: warpgroup 1's parked fp32 O (kOAcc = D/2 per thread) and its
  // (max, max, sum, sum) per thread.
  static constexpr int kMergeOffset = kBarOffset + kBarriers * kBarBytes;
  static constexpr int kMergeStatOffset = kMergeOffset + kWarpgroupThreads * (D / 2) * 4;
  static constexpr int kMergeBytes = Cfg::kKeySplit ? kMergeStatOffset - kMergeOffset + kWarpgroupThreads * 16 : 0;
  static constexpr int kSmemBytes = kBarOffset + kBarriers * kBarBytes + kMergeBytes + kSw128Align;  // + slack
  // Split-KV partials (fp32 O per consumer thread + row max / sum) reuse the K ring.
  static constexpr int kPartialOBytes = Cfg::kConsumerThreads * (D / 2) * 4;
  static constexpr int kPartialStatOffset = kKOffset + kPartialOBytes;
  static constexpr int kPartialBytes = kPartialOBytes + Cfg::kConsumerThreads * 16;
  // Split-KV needs the partials to fit the drained rings; a config where they do not
  // (e.g. two warpgroups at D=128 with 64-key tiles) runs unsplit only.
  static constexpr bool kCanSplit = kPartialBytes <= 2 * Cfg::kStages * static_cast<int>(kKVBytes);
  static_assert(kQBytes % kSw128Align == 0 && kKVBytes % kSw128Align == 0, "every tile starts 1024-aligned");
  static_assert(static_cast<size_t>(kSmemBytes) <= kSdpaMaxSmemPerBlock, "tiles exceed Hopper shared memory");
  static_assert(kSmemBytes <= (1 << 18), "shared addresses fit the 14-bit descriptor field (>> 4)");
  static_assert(kMergeOffset % 16 == 0, "the merge area is read and written as float4");
};

enum Ring : int { kFullK = 0, kFullV = 1, kEmptyK = 2, kEmptyV = 3 };
template <int kStages>
__device__ __forceinline__ uint32_t ring_bar(uint32_t bars, int ring, int index) {
  return bars + (2 + ring * kStages + index % kStages) * kBarBytes;
}
template <int kStages>
__device__ __forceinline__ uint32_t ring_parity(int index) {
  return static_cast<uint32_t>((index / kStages) & 1);
}
__device__ __forceinline__ uint32_t full_q_bar(uint32_t bars) { return bars; }
__device__ __forceinline__ uint32_t empty_q_bar(uint32_t bars) { return bars + kBarBytes; }
// Work item `local` of a block uses Q buffer local % kQStages, in phase (local / kQStages) & 1.
// With one buffer every helper is the plain expression (s6-s8 build the code they always did).
template <class Cfg>
__device__ __forceinline__ int q_slot(int local) {
  if constexpr (Cfg::kQStages == 1) return 0;
  return local % Cfg::kQStages;
}
template <class Cfg>
__device__ __forceinline__ uint32_t q_parity(int local) {
  return static_cast<uint32_t>((local / Cfg::kQStages) & 1);
}
// Item `local`'s Q buffer pair: slot 0's is the one above, a Q ring's slot 1's follows the four rings.
template <class Cfg>
__device__ __forceinline__ uint32_t full_q_bar(uint32_t bars, int local) {
  if constexpr (Cfg::kQStages == 1) return full_q_bar(bars);
  static_assert(Cfg::kQStages <= 2, "a Q ring of two buffers");
  return q_slot<Cfg>(local) == 0 ? full_q_bar(bars) : bars + (2 + 4 * Cfg::kStages) * kBarBytes;
}
template <class Cfg>
__device__ __forceinline__ uint32_t empty_q_bar(uint32_t bars, int local) {
  return full_q_bar<Cfg>(bars, local) + kBarBytes;
}
// Item `local`'s Q buffer, a byte offset into the block's shared memory.
template <class L>
__device__ __forceinline__ uint32_t q_offset(int local) {
  if constexpr (L::kQStages == 1) return L::kQOffset;
  return L::kQOffset + q_slot<L>(local) * L::kQBytes;
}

}  // namespace sdpa_warpspec
