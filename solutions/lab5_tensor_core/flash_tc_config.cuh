// Lab 5 (beyond): what one instantiation of the kernel is -- the steps of the staircase (one
// traits type per Version), the tile shape of a CTA, and the kernel's parameters.
#pragma once

#include "course/lab5_tensor_core.hpp"

namespace course::lab5::detail {

// ------------------------------------------------------------------------------------------
// The staircase: one traits type per step
// ------------------------------------------------------------------------------------------

// Each step derives from the one before it and switches on exactly one idea; the kernel reads
// the flags with `if constexpr`. Steps 1-6 are FlashAttention-2's forward pass (Dao, 2023) made
// faster one idea at a time; step 7 goes beyond FA2.
struct V1_MmaOnly {
  static constexpr Version kVersion = Version::mma_only;
  // mma.sync.m16n8k16; every fragment register is read from shared memory with a plain 32-bit
  // load (two 16-bit loads for V, which the B operand needs transposed)
  static constexpr bool ldmatrix = false;        // fragments through ldmatrix(.trans)
  static constexpr bool swizzle = false;         // XOR-swizzled shared-memory tiles
  static constexpr bool cp_async = false;        // asynchronous copies into two K/V stages
  static constexpr bool p_in_registers = false;  // S accumulator reused as the A operand of P.V
  static constexpr bool exp2_fma = false;        // exp2 with scale * log2(e) folded into one FFMA
  static constexpr bool lazy_rescale = false;    // keep the row max while P stays <= 2^8
};
// ldmatrix.x4 for Q, K and P fragments, ldmatrix.x4.trans for V.
struct V2_Ldmatrix : V1_MmaOnly {
  static constexpr Version kVersion = Version::ldmatrix;
  static constexpr bool ldmatrix = true;
};
// XOR-swizzled tiles: the 8 rows that one ldmatrix reads sit in 8 different bank groups.
struct V3_Swizzle : V2_Ldmatrix {
  static constexpr Version kVersion = Version::swizzle;
  static constexpr bool swizzle = true;
};
// cp.async into two shared-memory stages: tile j+1 streams in while tile j computes.
struct V4_Pipelined : V3_Swizzle {
  static constexpr Version kVersion = Version::pipelined;
  static constexpr bool cp_async = true;
};
// The S accumulator becomes the A operand of P.V in registers: no round trip of P through
// shared memory.
struct V5_RegisterP : V4_Pipelined {
  static constexpr Version kVersion = Version::register_p;
  static constexpr bool p_in_registers = true;
};
// exp(scale*(s - m)) as exp2(s*c - m*c) with c = scale*log2(e): one FFMA and one MUFU.EX2 per
// score instead of FADD, FMUL, FMUL, MUFU.EX2.
struct V6_Exp2Fma : V5_RegisterP {
  static constexpr Version kVersion = Version::exp2_fma;
  static constexpr bool exp2_fma = true;
};
// Beyond FA2: O is rescaled only when a row's max has grown by more than a factor 2^8 (exact:
// the reference max is only a shift, undone by the final O / l and the LSE).
struct V7_LazyRescale : V6_Exp2Fma {
  static constexpr Version kVersion = Version::lazy_rescale;
  static constexpr bool lazy_rescale = true;
};

// The traits type of a Version.
template <Version kVersion>
struct StepOf;
template <>
struct StepOf<Version::mma_only> {
  using type = V1_MmaOnly;
};
template <>
struct StepOf<Version::ldmatrix> {
  using type = V2_Ldmatrix;
};
template <>
struct StepOf<Version::swizzle> {
  using type = V3_Swizzle;
};
template <>
struct StepOf<Version::pipelined> {
  using type = V4_Pipelined;
};
template <>
struct StepOf<Version::register_p> {
  using type = V5_RegisterP;
};
template <>
struct StepOf<Version::exp2_fma> {
  using type = V6_Exp2Fma;
};
template <>
struct StepOf<Version::lazy_rescale> {
  using type = V7_LazyRescale;
};

// Shared-memory stages of K and V: two once copies are asynchronous, one before.
template <class Step>
constexpr int kStagesOf = Step::cp_async ? 2 : 1;

// ------------------------------------------------------------------------------------------
// The tile shape of one CTA
// ------------------------------------------------------------------------------------------

// kBlockM query rows, kBlockN keys per K/V tile, kWarps warps; each warp owns kBlockM / kWarps
// consecutive query rows (a multiple of 16, the M of one mma).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kMinBlocksPerSm_>
struct TileConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kRowsPerWarp = kBlockM / kWarps;
  static constexpr int kMTiles = kRowsPerWarp / 16;  // 16-row mma tiles per warp
  static constexpr int kNTiles = kBlockN / 8;        // 8-key column tiles of S
  static constexpr int kDTiles = kHeadDim / 8;       // 8-wide column tiles of O
  static_assert(kRowsPerWarp % 16 == 0, "each warp owns whole 16-row mma tiles");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "k-steps of 16");
  // The swizzle permutes the 8 16-byte chunks of a 128-byte span: rows need >= 8 chunks.
  static_assert(kHeadDim >= 64, "the swizzle needs rows of >= 64 halves (8 chunks)");
};

// ------------------------------------------------------------------------------------------
// The kernel's parameters
// ------------------------------------------------------------------------------------------

struct KernelParams {
  const void* q;  // [B*H, Nq, d]
  const void* k;  // [B*H, Nk, d]
  const void* v;  // [B*H, Nk, d]
  void* o;        // [B*H, Nq, d]
  float* lse;     // [B*H, Nq]
  int nq;
  int nk;
  bool causal;
  float scale;        // softmax scale (1/sqrt(d) by default)
  float scale_log2;   // scale * log2(e): exp(scale*(s-m)) == exp2(s*scale_log2 - m*scale_log2)
};

}  // namespace course::lab5::detail
