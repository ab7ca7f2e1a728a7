// Lab 8 (beyond): what one instantiation of the Hopper kernel is -- the steps of the staircase
// (one traits type per Version), the tile shape of a CTA, its shared memory, and the kernel's
// parameters.
#pragma once

#include <cstdint>

#include "course/lab8_hopper.hpp"

namespace course::lab8::detail {

// ------------------------------------------------------------------------------------------
// The staircase: one traits type per step (DESIGN.md section 3)
// ------------------------------------------------------------------------------------------

// Each step derives from the one before it and switches on exactly one idea; the kernel reads
// the flags with `if constexpr`, as in lab 5.
struct V1_Wgmma {
  static constexpr Version kVersion = Version::wgmma;
  // S = Q K^T and O += P V on wgmma, with Q, K, V in 128-byte-swizzled shared memory that all
  // threads fill with 16-byte loads (then fence.proxy.async: wgmma reads through the async proxy)
  static constexpr bool tma = false;        // tiles copied by TMA, completion on an mbarrier
  static constexpr bool pipelined = false;  // several K/V stages, loads issued ahead
  static constexpr bool warp_specialized = false;  // a producer warpgroup feeds the others
  static constexpr bool causal_skip = false;       // causal: only the visible K/V tiles
  static constexpr bool intra_wg_overlap = false;  // softmax of tile j under P_{j-1} V_{j-1}
  static constexpr bool pingpong = false;          // consumer warpgroups alternate their GEMMs
  static constexpr int kPolyOf8 = 0;  // of every 8 column groups of S, how many get 2^x on the FMA pipes
  static constexpr bool persistent = false;  // one CTA per SM takes work tiles until none is left
};
// One thread issues a TMA copy per 64-column block of a tile; everybody waits on the barrier.
struct V2_Tma : V1_Wgmma {
  static constexpr Version kVersion = Version::tma;
  static constexpr bool tma = true;
};
// kStages K/V stages with separate K and V barriers: tile j + kStages is requested once tile j is
// done, and loads while tiles j + 1 .. j + kStages - 1 compute; S = Q K^T may start before V has
// landed.
struct V3_Pipelined : V2_Tma {
  static constexpr Version kVersion = Version::pipelined;
  static constexpr bool pipelined = true;
};
// One more warpgroup, the producer, whose one elected thread issues every TMA copy; the other
// warpgroups (the consumers) only compute. Each stage gets "empty" barriers as well as "full"
// ones (DESIGN.md section 5): a consumer warp releases a stage after the wgmma_wait that covers
// its last read of it, and the producer refills the stage once every consumer warp has. No
// CTA-wide barrier in the loop; setmaxnreg moves registers from the producer to the consumers.
struct V4_WarpSpecialized : V3_Pipelined {
  static constexpr Version kVersion = Version::warp_specialized;
  static constexpr bool warp_specialized = true;
};
// Causal: a query tile visits only the K/V tiles up to its last row's diagonal, and only the
// tiles that cross the diagonal (or Nk) are masked; the heaviest query tiles are launched first.
// Steps 1-4 do all of a causal problem's tiles and mask every one: twice the work at large N.
struct V5_CausalSkip : V4_WarpSpecialized {
  static constexpr Version kVersion = Version::causal_skip;
  static constexpr bool causal_skip = true;
};
// Inside a consumer warpgroup, the two products of neighbouring tiles are issued together:
// S_j = Q K_j^T, then O += P_{j-1} V_{j-1}; the softmax of S_j runs while the tensor cores do
// P_{j-1} V_{j-1} (FA3's intra-warpgroup overlap). One tile of prologue and of epilogue.
struct V6_IntraWgOverlap : V5_CausalSkip {
  static constexpr Version kVersion = Version::intra_wg_overlap;
  static constexpr bool intra_wg_overlap = true;
};
// The two consumer warpgroups take turns issuing their pair of products (two named barriers), so
// that one warpgroup's exponentials run while the other's products keep the tensor cores busy
// (FA3's ping-pong schedule).
struct V7_Pingpong : V6_IntraWgOverlap {
  static constexpr Version kVersion = Version::pingpong;
  static constexpr bool pingpong = true;
};
// The softmax's exponentials split between two units (FlashAttention-4's trick): an SM computes
// 16 MUFU.EX2 a clock, and at d = 64 a tile's 2^x take as long there as its two products take on
// the tensor cores (lecture 8, section 5). 2 of every 8 column groups get 2^x from a degree-3
// polynomial on the FMA pipes (128 lanes) instead: 6 FP32 instructions and 4 others each. The
// arithmetic says 3 of 8 would even out the two pipes; measured on an H200, every share tried
// (2, 3, 4 of 8) is slower than step 7 and 2 is the least slow (lecture 8, step 8).
struct V8_Exp2Poly : V7_Pingpong {
  static constexpr Version kVersion = Version::exp2_poly;
  static constexpr int kPolyOf8 = 2;
};

// The CTAs stay: one per SM, each doing a fixed share of the (query tile, head) work tiles one
// after another, so that the next work tile's Q and first K/V tiles load while the consumers
// finish the last one (its final P V and the stores of O and the LSE), instead of in a new CTA
// that starts from nothing. The barriers' phases carry on from one work tile to the next. Built
// on step 7, not step 8: the polynomial 2^x was slower at every share measured.
struct V9_Persistent : V7_Pingpong {
  static constexpr Version kVersion = Version::persistent;
  static constexpr bool persistent = true;
};

template <Version kVersion>
struct StepOf;
template <>
struct StepOf<Version::wgmma> {
  using type = V1_Wgmma;
};
template <>
struct StepOf<Version::tma> {
  using type = V2_Tma;
};
template <>
struct StepOf<Version::pipelined> {
  using type = V3_Pipelined;
};
template <>
struct StepOf<Version::warp_specialized> {
  using type = V4_WarpSpecialized;
};
template <>
struct StepOf<Version::causal_skip> {
  using type = V5_CausalSkip;
};
template <>
struct StepOf<Version::intra_wg_overlap> {
  using type = V6_IntraWgOverlap;
};
template <>
struct StepOf<Version::pingpong> {
  using type = V7_Pingpong;
};
template <>
struct StepOf<Version::exp2_poly> {
  using type = V8_Exp2Poly;
};
template <>
struct StepOf<Version::persistent> {
  using type = V9_Persistent;
};

// ------------------------------------------------------------------------------------------
// The tile shape of one CTA
// ------------------------------------------------------------------------------------------

// kBlockM query rows per CTA, kBlockN keys per K/V tile, kStages K/V stages once the loads are
// pipelined. A warpgroup (4 warps, 128 threads) owns 64 query rows -- the M of one wgmma -- so
// the CTA has kBlockM / 64 warpgroups. Every warp owns 16 whole rows of the accumulators, so a
// row's max and sum need only the 4 lanes of a quad (mma_sm90.cuh section 3), as in lab 5.
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_>
struct TileConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kWarpgroups = kBlockM / 64;
  static constexpr int kThreads = 128 * kWarpgroups;
  static_assert(kBlockM % 64 == 0, "a warpgroup owns 64 query rows (wgmma's M)");
  static_assert(kHeadDim == 64 || kHeadDim == 128, "wgmma N = d for O += P V: 64 or 128");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "wgmma N = kBlockN for S, a multiple of 16");
  static_assert(kBlockM <= 256 && kBlockN <= 256, "a TMA box has at most 256 rows");
};

// The K/V stages a step uses: one until the loads are pipelined.
template <class Cfg, class Step>
constexpr int kStagesOf = Step::pipelined ? Cfg::kStages : 1;

// The threads of a CTA: the consumers' warpgroups, plus the producer's from step 4 on.
template <class Cfg, class Step>
constexpr int kThreadsOf = Cfg::kThreads + (Step::warp_specialized ? 128 : 0);

// Step 4's register budgets (DESIGN.md section 6). With __launch_bounds__(threads, 1) every
// thread starts with the cap 65536 / threads, rounded down to a multiple of 8; setmaxnreg.dec
// gives the producer's surplus back to the CTA's pool and setmaxnreg.inc takes it for the
// consumers, so producer + consumers * consumer_regs must not exceed (1 + consumers) * cap,
// or the consumers' setmaxnreg.inc waits for registers that never come. 2 consumers: 24 + 2 * 240
// = 504 = 3 * 168 (FA3's numbers, and micro-test 6); 3 consumers: 32 + 3 * 160 = 512 = 4 * 128.
template <class Cfg>
struct RegisterBudget {
  static constexpr int kConsumers = Cfg::kWarpgroups;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kCapAtLaunch = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducer = kConsumers == 2 ? 24 : 32;
  static constexpr int kConsumer = kConsumers == 2 ? 240 : 160;
  static_assert(kConsumers == 2 || kConsumers == 3, "budgets for 2 or 3 consumer warpgroups");
  static_assert(kProducer + kConsumers * kConsumer <= (kConsumers + 1) * kCapAtLaunch,
                "setmaxnreg: the consumers ask for more registers than the producer gives back");
};

// ------------------------------------------------------------------------------------------
// Shared memory: Q, then the K stages, then the V stages, each tile 1024-byte aligned
// ------------------------------------------------------------------------------------------

// Every tile is stored as d/64 column blocks of [rows][64] 16-bit elements in the 128-byte
// swizzle (mma_sm90.cuh section 1). The hardware swizzles on address bits, so each tile must
// start on a multiple of 1024 bytes; the sizes below are all multiples of 1024, and the kernel
// rounds the start of dynamic shared memory up to 1024 (hence the extra 1024 bytes).
template <class Cfg, class Step>
struct SmemLayout {
  static constexpr int kQBytes = Cfg::kBlockM * Cfg::kHeadDim * 2;
  static constexpr int kTileBytes = Cfg::kBlockN * Cfg::kHeadDim * 2;  // one K or V tile
  static constexpr int kStages = kStagesOf<Cfg, Step>;
  static constexpr int kKOffset = kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kTileBytes;
  static constexpr int kBytes = kVOffset + kStages * kTileBytes + 1024;
  // Where stage `stage`'s K tile and V tile start, in bytes from the start of Q.
  __host__ __device__ static constexpr int k_offset(int stage) { return kKOffset + stage * kTileBytes; }
  __host__ __device__ static constexpr int v_offset(int stage) { return kVOffset + stage * kTileBytes; }
  static_assert(kQBytes % 1024 == 0 && kTileBytes % 1024 == 0, "tiles on 1024-byte boundaries");
  static_assert(kBytes <= 227 * 1024, "an H100/H200 CTA has at most 227 KB of shared memory");
};

// ------------------------------------------------------------------------------------------
// The kernel's parameters (the tensor maps travel as separate __grid_constant__ arguments)
// ------------------------------------------------------------------------------------------

struct KernelParams {
  const void* q;  // [B*H, Nq, d] (read directly by step 1; steps 2-9 read through the maps)
  const void* k;  // [B*H, Nk, d]
  const void* v;  // [B*H, Nk, d]
  void* o;        // [B*H, Nq, d]
  float* lse;     // [B*H, Nq]
  int nq;
  int nk;
  bool causal;
  float scale;       // softmax scale (1/sqrt(d) by default)
  float scale_log2;  // scale * log2(e): exp(scale*(s-m)) == exp2(s*scale_log2 - m*scale_log2)
  int batch_heads;   // B * H: the heads the tensor maps and the grid (step 9: its schedule) cover
};

}  // namespace course::lab8::detail
