// Which K/V tiles a query tile visits, and which of them need a mask: the causal tile skipping
// of the forward kernels of lab 5 and lab 8 (step 5). Cfg is a lab's tile configuration: it has
// kBlockM query rows and kBlockN keys per tile. Causal is bottom-right aligned, as everywhere in
// the course: query row r sees keys 0 .. r + Nk - Nq.
#pragma once

namespace course {

// Number of K/V tiles a query tile [q0, q0 + kBlockM) must visit. Causal (bottom-right): the last
// row, q_last, sees keys up to q_last + Nk - Nq, so later tiles are skipped entirely.
template <class Cfg>
__device__ __forceinline__ int kv_tiles_to_visit(int q0, int nq, int nk, bool causal) {
  const int all_tiles = (nk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if (!causal) return all_tiles;
  const int q_last = min(q0 + Cfg::kBlockM, nq) - 1;
  const int last_key = q_last + nk - nq;
  if (last_key < 0) return 0;
  return min(all_tiles, last_key / Cfg::kBlockN + 1);
}

// K/V tiles 0 .. (returned value - 1) need no mask for the rows from `first_row` on that one
// warp (lab 5) or warpgroup (lab 8) owns: they lie wholly inside Nk and, if causal, wholly left
// of that row's diagonal (every later row sees even more keys). Later tiles go through apply_mask.
template <class Cfg>
__device__ __forceinline__ int kv_tiles_without_mask(int first_row, int nq, int nk, bool causal) {
  const int inside_nk = nk / Cfg::kBlockN;
  if (!causal) return inside_nk;
  // Tile j is left of the diagonal when its last key j*N + N - 1 <= first_row + nk - nq.
  const int keys_seen = first_row + nk - nq + 1;
  return keys_seen < 0 ? 0 : min(inside_nk, keys_seen / Cfg::kBlockN);
}

}  // namespace course
