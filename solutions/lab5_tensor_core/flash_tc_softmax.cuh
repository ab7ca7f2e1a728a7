// Lab 5 (beyond): the online softmax of one K/V tile (FA2 Algorithm 1, line 9 and the rescale
// half of line 10), on the accumulator fragments of a warp: row reductions over a quad, the
// running max and sum, and the rescale of O.
#pragma once

#include "course/quad_reduce.cuh"
#include "flash_tc_config.cuh"
#include "flash_tc_ptx.cuh"

namespace course::lab5::detail {

// quad_max and quad_sum (a row's max and sum over its quad): course/quad_reduce.cuh.

// Line 9 (and the rescale half of line 10): the online softmax.
//   m_new = max(m_old, rowmax(S));  P = exp(scale * (S - m_new));  alpha = exp(scale*(m_old - m_new))
//   l = alpha * l + rowsum(P);      O = alpha * O
// S is overwritten by P. m is kept in raw (unscaled) score units. row_sum holds only this lane's
// part of l (its 2*kNTiles columns); the quad adds the parts once, at the end.
// A row that has seen only -inf has m_new = -inf: we subtract 0 instead, so P = exp(-inf) = 0
// and alpha = 0 instead of exp(-inf - -inf) = NaN. A row whose max did not change has alpha = 1
// without an exponential, and when that holds for every row of the warp, the O rescale
// (kMTiles*kDTiles*4 FMULs a thread) is skipped.
//
// Step::exp2_fma: exp(scale*(x - m)) = 2^(x*scale*log2e - m*scale*log2e), one FFMA and one
// MUFU.EX2 per element instead of FADD, FMUL, FMUL, MUFU.EX2.
// Step::lazy_rescale (beyond FA2): m is only a reference point -- any m gives the same O / l
// and m*scale + log(l) -- it just has to keep P from overflowing. So keep m_old until the tile
// max exceeds it by more than 8 in log2 units (P <= 2^8, harmless in fp32 and in bf16/fp16 P);
// then alpha = 1 exactly, and once the row maxima settle the O rescale is skipped on most tiles.
template <class Cfg, class Step>
__device__ __forceinline__ void online_softmax(float (&s)[Cfg::kMTiles][Cfg::kNTiles][4],
                                               float (&o)[Cfg::kMTiles][Cfg::kDTiles][4],
                                               float (&row_max)[Cfg::kMTiles][2],
                                               float (&row_sum)[Cfg::kMTiles][2], float scale,
                                               float scale_log2) {
  // BEGIN SOLUTION online_softmax device
  //! row r (0 or 1) of tile mt is in s[mt][*][2r] and s[mt][*][2r+1]; reduce the max over the quad
  //! guard the fully masked row: subtract 0 when the new max is -inf (no NaN from -inf - -inf)
  //! rescale o and row_sum by alpha = exp(scale*(m_old - m_new)) before adding this tile
  //! Step::exp2_fma: exponentials as exp2_approx(fmaf(s, scale_log2, -m * scale_log2))
  //! Step::lazy_rescale: keep m_old unless (tile_max - m_old) * scale_log2 > 8
  constexpr float kLazyThresholdLog2 = 8.0f;
  float alpha[Cfg::kMTiles][2];
  bool any_rescale = false;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < Cfg::kNTiles; ++nt)
        tile_max = fmaxf(tile_max, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
      tile_max = quad_max(tile_max);
      const float m_old = row_max[mt][r];
      float m_new = fmaxf(m_old, tile_max);
      if constexpr (Step::lazy_rescale) {
        // Also true when m_old = -inf and the tile has a key; false when tile_max = -inf.
        const bool grew = (tile_max - m_old) * scale_log2 > kLazyThresholdLog2;
        m_new = grew ? tile_max : m_old;
      }
      const float m_safe = (m_new == -INFINITY) ? 0.0f : m_new;
      float sum = 0.0f;
      if constexpr (Step::exp2_fma) {
        const float m_scaled = m_safe * scale_log2;
        alpha[mt][r] = m_new == m_old ? 1.0f : exp2_approx(m_old * scale_log2 - m_scaled);
#pragma unroll
        for (int nt = 0; nt < Cfg::kNTiles; ++nt)
#pragma unroll
          for (int c = 2 * r; c < 2 * r + 2; ++c) {
            s[mt][nt][c] = exp2_approx(fmaf(s[mt][nt][c], scale_log2, -m_scaled));
            sum += s[mt][nt][c];
          }
      } else {
        // The textbook form: subtract, scale, exponentiate.
        alpha[mt][r] = m_new == m_old ? 1.0f : __expf((m_old - m_safe) * scale);
#pragma unroll
        for (int nt = 0; nt < Cfg::kNTiles; ++nt)
#pragma unroll
          for (int c = 2 * r; c < 2 * r + 2; ++c) {
            s[mt][nt][c] = __expf((s[mt][nt][c] - m_safe) * scale);
            sum += s[mt][nt][c];
          }
      }
      row_max[mt][r] = m_new;
      row_sum[mt][r] = alpha[mt][r] * row_sum[mt][r] + sum;
      any_rescale |= alpha[mt][r] != 1.0f;
    }
  // Warp-uniform branch: skip the O rescale when no row of the warp needs it.
  if (__any_sync(0xffffffffu, any_rescale)) {
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
      for (int dt = 0; dt < Cfg::kDTiles; ++dt)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[mt][dt][c] *= alpha[mt][c >> 1];
  }
  // END SOLUTION
}

}  // namespace course::lab5::detail
