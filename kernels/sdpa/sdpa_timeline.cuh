// sdpa_timeline.cuh -- per-block phase stamps for the warp-specialized kernel
// (sdpa_warpspec.cuh), compiled in only with -DWS_TIMELINE=1: where one
// launch's time goes, block by block (tools/microbench/sdpa_timeline.cu reads
// them, tools/timeline_report.py sums them up). Off (the default) every stamp
// is empty and the SASS is unchanged.
//
// A block's record is (launch slot, blockIdx.x). The harness starts launch i's
// output at the i-th 2^kSlotShift-byte window after an aligned base, so the
// output address's bits [kSlotShift, kSlotShift + 6) differ between launches
// (up to kMaxLaunches), and a stamp finds its record from the output pointer
// alone: no global read or atomic on the block's path.
// A stamp writes the SM's clock64 (the entry also the global nanosecond timer); WS_STAMP_IF
// reads the kernel's parameters as `prm` (Params) from the enclosing scope.
#pragma once

#ifndef WS_TIMELINE
#define WS_TIMELINE 0
#endif
// Which phases stamp (bit p: Phase p; the entry always does): fewer stamps, less perturbation.
#ifndef WS_TIMELINE_MASK
#define WS_TIMELINE_MASK 0xffffffffu
#endif

namespace sdpa_timeline {

// The phases, in the order one block of the key split meets them.
enum Phase : int {
  kEntry = 0,        // thread 0, first instruction
  kPrologue,         // thread 0, barriers initialised (after __syncthreads)
  kProducerGo,       // producer, past griddepcontrol.wait
  kLoadsIssued,      // producer, every TMA of the block issued
  kConsumerGo,       // consumer warpgroup 0, past griddepcontrol.wait
  kQLanded,          // consumer warpgroup 0, Q's barrier passed
  kKLanded,          // consumer warpgroup 0, its first K tile's barrier passed
  kFirstTile,        // consumer warpgroup 0, first key tile's S and softmax done
  kMainloop,         // consumer warpgroup 0, last P.V done
  kPeerMainloop,     // consumer warpgroup 1, last P.V done
  kMergeReady,       // the merging warpgroup, the peers' partials are in shared memory
  kFolded,           // the merging warpgroup, the peers' partials folded into its O
  kStored,           // the storing warpgroup (the first), O stored
  kQIssued,          // producer, Q's TMA issued (last so the earlier phases keep their bits)
  kItemDecoded,      // producer, the work item decoded, Q's TMA next
  kPhases
};

// A persistent block's first kMaxItems work items, each with its own stamps (the phases above keep
// the last item's): where the time between one item's last P.V and the next item's first goes.
constexpr int kMaxItems = 16;
enum ItemPhase : int {
  kItemQLanded = 0,  // consumer warpgroup 0, the item's Q barrier passed
  kItemFirstTile,    // consumer warpgroup 0, the item's first key tile's S and softmax done
  kItemMainloop,     // consumer warpgroup 0, the item's last P.V done
  kItemStored,       // the storing warpgroup, the item's O stored
  kItemPhases
};

// A middle key tile of a consumer warpgroup (sdpa_warpspec.cuh's middle_tile), split into the
// steps its warps walk, each step's clock64 cycles summed over the block's middle tiles (warp 0's
// sums recorded): where a tile's time goes in steady state. kTileCount counts the tiles.
constexpr int kMaxConsumerWGs = 3;
enum TilePhase : int {
  kTileRescale = 0,  // O's rescale before the turn (pingpong, s16's order)
  kTileKWait,        // K(idx) landed
  kTileTurnWait,     // this warpgroup's turn (the other's GEMM issue before it)
  kTileIssue,        // S = Q.K^T issued, V(prev) waited for, P.V issued, the turn passed on
  kTileSWait,        // S(idx) done on the tensor cores
  kTileSoftmax,      // the softmax (FlashAttention-4's order: with the P.V's wait and O's rescale)
  kTilePvWait,       // P(prev).V(prev) done
  kTilePack,         // P packed to fp16/bf16 for the next P.V
  kTileCount,
  kTilePhases
};

struct Record {
  unsigned long long out;  // the launch's output pointer: which launch
  unsigned block, smid;
  long long clock[kPhases];
  unsigned long long entry_ns;  // %globaltimer at entry: places blocks and launches against each other
  long long item_clock[kMaxItems][kItemPhases];
  unsigned long long tile_cycles[kMaxConsumerWGs][kTilePhases];
};

constexpr int kSlotShift = 27;  // 128 MiB per output: (4,16,4096,128) in 16 bits is 64 MiB
constexpr int kMaxLaunches = 64;
constexpr int kMaxBlocks = 1024;
constexpr int kMaxRecords = kMaxLaunches * kMaxBlocks;

#if WS_TIMELINE
__device__ Record g_records[kMaxRecords];

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
// kMaxRecords (no record) past the blocks a launch may record.
__device__ __forceinline__ unsigned record_index(const void* out) {
  const unsigned slot = static_cast<unsigned>(reinterpret_cast<unsigned long long>(out) >> kSlotShift) % kMaxLaunches;
  return blockIdx.x < kMaxBlocks ? slot * kMaxBlocks + blockIdx.x : kMaxRecords;
}
// Only the entry reads %globaltimer: a read of it costs the stamping thread time that
// clock64 does not (in front of the producer's first TMA, it showed as TMA latency).
__device__ __forceinline__ void stamp(const void* out, Phase phase) {
  const unsigned i = record_index(out);
  if (i >= kMaxRecords) return;
  g_records[i].clock[phase] = clock64();
}
__device__ __forceinline__ void stamp_item(const void* out, ItemPhase phase, int item) {
  const unsigned i = record_index(out);
  if (i >= kMaxRecords || item >= kMaxItems) return;
  g_records[i].item_clock[item][phase] = clock64();
}
// A consumer warp's middle-tile clocks, summed in registers (a global write per step slowed the
// stamped build by half) and written to its block's record once, at the end (flush).
struct TileClocks {
  long long last = 0;
  long long sum[kTilePhases] = {};
  __device__ __forceinline__ void begin() { last = clock64(); }
  __device__ __forceinline__ void step(TilePhase phase) {
    const long long now = clock64();
    sum[phase] += now - last;
    last = now;
  }
  __device__ __forceinline__ void flush(const void* out, int wg) const {
    const unsigned i = record_index(out);
    if (i >= kMaxRecords || wg >= kMaxConsumerWGs) return;
    for (int p = 0; p < kTilePhases; ++p) g_records[i].tile_cycles[wg][p] = static_cast<unsigned long long>(sum[p]);
  }
};
// Thread 0 at entry.
__device__ __forceinline__ void open(const void* out) {
  const unsigned i = record_index(out);
  if (i >= kMaxRecords) return;
  g_records[i].out = reinterpret_cast<unsigned long long>(out);
  g_records[i].block = blockIdx.x;
  g_records[i].smid = smid();
  g_records[i].clock[kEntry] = clock64();
  g_records[i].entry_ns = global_ns();
}
#define WS_TIMELINE_OPEN(out) sdpa_timeline::open(out)
#define WS_STAMP_IF(cond, phase)                                  \
  do {                                                            \
    if (((WS_TIMELINE_MASK) >> sdpa_timeline::phase & 1u) && (cond)) sdpa_timeline::stamp(prm.p.out, sdpa_timeline::phase); \
  } while (0)
// Item `item` of the block (the consumer's `local`) at item phase `phase`.
#define WS_STAMP_ITEM_IF(cond, phase, item)                                          \
  do {                                                                               \
    if (cond) sdpa_timeline::stamp_item(prm.p.out, sdpa_timeline::phase, item);      \
  } while (0)
// A consumer's middle-tile clocks (TileClocks): a member, each tile's begin and steps, the flush.
#define WS_TILE_CLOCKS_MEMBER sdpa_timeline::TileClocks tile_clocks;
#define WS_TILE_BEGIN() (tile_clocks.begin(), tile_clocks.sum[sdpa_timeline::kTileCount] += 1)
#define WS_TILE_STEP(phase) tile_clocks.step(sdpa_timeline::phase)
#define WS_TILE_FLUSH_IF(cond, wg)                 \
  do {                                             \
    if (cond) tile_clocks.flush(prm.p.out, wg);    \
  } while (0)
#else
#define WS_TIMELINE_OPEN(out) ((void)0)
#define WS_STAMP_IF(cond, phase) ((void)0)
#define WS_STAMP_ITEM_IF(cond, phase, item) ((void)0)
#define WS_TILE_CLOCKS_MEMBER
#define WS_TILE_BEGIN() ((void)0)
#define WS_TILE_STEP(phase) ((void)0)
#define WS_TILE_FLUSH_IF(cond, wg) ((void)0)
#endif

}  // namespace sdpa_timeline
