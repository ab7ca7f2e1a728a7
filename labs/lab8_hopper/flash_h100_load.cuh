// Lab 8 (beyond): how tiles get into shared memory (FA2 Algorithm 1, lines 4 and 7) -- by all
// threads with 16-byte loads (step 1), or by the TMA copy engine completing on an mbarrier
// (steps 2-9; from step 4 the producer warpgroup issues them) -- and the barrier wait every TMA consumer uses.
#pragma once

#include <cstdint>

#include "course/mma_sm90.cuh"
#include "flash_h100_config.cuh"

namespace course::lab8::detail {

using namespace course::sm90;

// ------------------------------------------------------------------------------------------
// Step 1: plain 16-byte loads into the 128-byte swizzle
// ------------------------------------------------------------------------------------------

// Copy rows [0, kRows) of a [rows][kHeadDim] row-major global tile into a swizzled shared tile
// (d/64 column blocks, sw128_tile_offset); rows at or past `valid_rows` become zeros, so that a
// partial last tile never reads past the end of a head and contributes 0 * P = 0 to O. A thread
// moves whole 16-byte chunks: consecutive threads take consecutive chunks of a row (coalesced),
// and a 16-byte chunk stays whole under the swizzle (it permutes chunks, not bytes).
// The caller must then fence.proxy.async and __syncthreads before wgmma reads the tile.
template <int kRows, int kHeadDim, int kThreads, class T>
__device__ __forceinline__ void load_tile_sw128(unsigned char* tile, const T* gmem, int valid_rows,
                                                int tid) {
  // TODO: load_tile_sw128 (see the lab README)
  // chunk c of the tile is row c / (kHeadDim/8), columns 8*(c % (kHeadDim/8)) .. +7; thread tid
  // takes chunks tid, tid + kThreads, ...; store each at sw128_tile_offset<kRows>(row, col)
}

// ------------------------------------------------------------------------------------------
// Steps 2-9: TMA
// ------------------------------------------------------------------------------------------

// One tile of kRows rows starting at `row0` of head `head`: one TMA copy per 64-column block
// (a box's inner extent may not exceed the 128-byte swizzle span), all completing on `bar`.
// Rows past the end of the head are outside the 3-D tensor [B*H][N][d], so the copy engine
// writes zeros there (never the next head's rows) and still counts the full box's bytes
// (checked on the H200: micro-test 4). Issued by one thread, after arrive_expect_tx on `bar`.
template <int kRows, int kHeadDim>
__device__ __forceinline__ void tma_load_tile(unsigned char* tile, const CUtensorMap* map,
                                              uint64_t* bar, int row0, int head) {
  // TODO: tma_load_tile (see the lab README)
  // for each column block b: tma_load_3d(tile + b * kRows * 128, map, bar, 64 * b, row0, head)
}

// Waiting for a barrier phase. A protocol mistake (a wrong parity, a transaction count that
// never reaches zero) makes a plain wait spin forever; this one gives up after about 9 s at the
// H200's clock and stops the kernel, so the launch fails with an error the host sees instead of
// hanging the GPU. The clock is read only once the first try has failed, so a wait that
// succeeds at once costs what mbarrier_wait_parity costs.
//
// It stops the kernel with `brkpt`, not `__trap()`: with a trap anywhere in the code that
// follows setmaxnreg, ptxas 13.0 stops honouring setmaxnreg when it allocates registers and
// gives every warpgroup the 168 of the launch, so step 6's consumers (S, P and O live together,
// about 200 registers at d = 128) spill 200 bytes. With brkpt it allocates up to 240 there, as
// it should. Without a debugger attached, brkpt ends the launch with an error, as a trap does.
constexpr long long kBarrierTimeoutCycles = 1LL << 34;

__device__ __forceinline__ void wait_barrier(uint64_t* bar, uint32_t parity) {
  if (mbarrier_try_wait_parity(bar, parity)) return;
  const long long start = clock64();
  while (!mbarrier_try_wait_parity(bar, parity)) {
    if (clock64() - start > kBarrierTimeoutCycles) asm volatile("brkpt;");
  }
}

}  // namespace course::lab8::detail
