// Compile-only test of the Hopper toolkit (include/course/mma_sm90.cuh): every wrapper is
// instantiated in a kernel built for sm_90a, so that a wrapper with a wrong PTX spelling, operand
// count or constraint fails the build here instead of in lab 8. tools/check-sm90a-toolkit compiles
// this file, checks that each PTX instruction appears in the PTX (and, where cuobjdump is found,
// that the SASS has HGMMA and UTMALDG), that ptxas honoured setmaxnreg (no "(C7508) ... 'setmaxnreg'
// ignored" line), and that no kernel spills. Nothing here runs: what the instructions *do* on a GPU
// is tested by sm90a_microtests.cu (tools/gpu-check sm90a). The static_asserts are host-side
// checks of the arithmetic.
#include "course/mma_sm90.cuh"

namespace sm90 = course::sm90;

// ---- The descriptor (section 2 of the header) -------------------------------------------

// A K-major tile at shared address 0x400: start 0x400 >> 4 = 0x40, LBO field 1 (16 B, unused),
// SBO 1024 >> 4 = 64, swizzle mode 1 (128 B) in bits 62-63. CUTLASS's make_gmma_desc writes the
// same fields for a Layout_K_SW128_Atom tile (cute/atom/mma_traits_sm90_gmma.hpp).
static_assert(sm90::desc_k_major_sw128(0x400) == 0x4000004000010040ull);
static_assert(sm90::desc_start_address(sm90::desc_k_major_sw128(0x400)) == 0x400);
static_assert(sm90::desc_lbo(sm90::desc_k_major_sw128(0x400)) == 16);
static_assert(sm90::desc_sbo(sm90::desc_k_major_sw128(0x400)) == 1024);
static_assert(sm90::desc_swizzle(sm90::desc_k_major_sw128(0x400)) == 1);
static_assert(sm90::desc_base_offset(sm90::desc_k_major_sw128(0x400)) == 0);
// A V tile of 176 keys: its second 64-column block starts 176 * 128 bytes after the first.
static_assert(sm90::desc_lbo(sm90::desc_mn_major_sw128(0x8000, 176 * 128)) == 176 * 128);
static_assert(sm90::desc_sbo(sm90::desc_mn_major_sw128(0x8000, 176 * 128)) == 1024);
// Advancing by one k-step (32 bytes) moves only the start address.
static_assert(sm90::desc_advance(sm90::desc_k_major_sw128(0x400), 32) ==
              sm90::desc_k_major_sw128(0x420));
// The largest shared address (227 KB) still fits the 14-bit field.
static_assert(sm90::desc_start_address(sm90::desc_k_major_sw128(227 * 1024)) == 227 * 1024);

// ---- The 128-byte swizzle (section 1) ------------------------------------------------------

// Row 0 is not permuted; chunk c of row r moves to chunk c ^ (r % 8); the pattern repeats every
// 8 rows; lab 5's swizzle at d = 64 (mma_sm80.cuh tile_offset<64, true>) is the same map.
static_assert(sm90::sw128_offset(0, 9) == 18);
static_assert(sm90::sw128_offset(1, 0) == 128 + 16);
static_assert(sm90::sw128_offset(3, 3 * 8 + 5) == 3 * 128 + 0 * 16 + 10);
static_assert(sm90::sw128_offset(9, 8) == sm90::sw128_offset(1, 8) + 8 * 128);
static_assert(sm90::sw128_tile_offset<128>(5, 64 + 7) == 128 * 128 + sm90::sw128_offset(5, 7));

// ---- The accumulator fragment (section 3) --------------------------------------------------

// Thread 0 holds D[0][0], D[0][1], D[8][0], D[8][1], then D[0][8] ...; thread 37 (warp 1, lane 5:
// g = 1, q = 1) holds D[17][2]; the last register of the last thread at N = 64 is D[63][63].
static_assert(sm90::acc_row(0, 0) == 0 && sm90::acc_col(0, 1) == 1 && sm90::acc_row(0, 2) == 8);
static_assert(sm90::acc_col(0, 4) == 8);
static_assert(sm90::acc_row(37, 0) == 17 && sm90::acc_col(37, 0) == 2);
static_assert(sm90::acc_row(127, 31) == 63 && sm90::acc_col(127, 31) == 63);

// ---- wgmma, every shape and form -----------------------------------------------------------

template <int N, class T>
__global__ void __launch_bounds__(128) wgmma_shapes(float* out, uint64_t desc_a, uint64_t desc_b,
                                                    const uint32_t* a_regs, int accumulate) {
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
  uint32_t a[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = a_regs[4 * threadIdx.x + i];
  sm90::wgmma_fence();
  sm90::fence_operand(d);
  sm90::wgmma_ss<N, T>(d, desc_a, desc_b, accumulate != 0);                            // Q K^T
  sm90::wgmma_ss<N, T, 0, 1>(d, sm90::desc_advance(desc_a, 32), desc_b, true);          // MN-major B
  sm90::wgmma_rs<N, T, 1>(d, a, sm90::desc_advance(desc_b, 2048), true);                // P V
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_operand(d);
#pragma unroll
  for (int i = 0; i < N / 2; ++i) out[i * 128 + threadIdx.x] = d[i];
}

template <class T>
void instantiate_all_shapes() {
  (void)wgmma_shapes<64, T>;
  (void)wgmma_shapes<96, T>;
  (void)wgmma_shapes<128, T>;
  (void)wgmma_shapes<160, T>;
  (void)wgmma_shapes<176, T>;
  (void)wgmma_shapes<192, T>;
}
template void instantiate_all_shapes<__nv_bfloat16>();
template void instantiate_all_shapes<__half>();

// ---- mbarrier, TMA, fences, stmatrix --------------------------------------------------------

__global__ void __launch_bounds__(128) tma_and_barriers(const __grid_constant__ CUtensorMap map2,
                                                        const __grid_constant__ CUtensorMap map3,
                                                        const __grid_constant__ CUtensorMap map4,
                                                        int row, int head, int* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[2];
  const int tid = threadIdx.x;
  if (tid == 0) {
    sm90::prefetch_tensormap(&map3);
    sm90::mbarrier_init(&bars[0], 1);
    sm90::mbarrier_init(&bars[1], 128);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  if (tid < 32 && sm90::elect_one_sync()) {
    sm90::mbarrier_arrive_expect_tx(&bars[0], 3 * 64 * 64 * 2);
    sm90::tma_load_2d(smem, &map2, &bars[0], 0, row);
    sm90::tma_load_3d(smem + 8192, &map3, &bars[0], 64, row, head);
    sm90::tma_load_4d(smem + 16384, &map4, &bars[0], 0, row, head, 0);
  }
  sm90::mbarrier_wait_parity(&bars[0], 0);
  // Consumers release the stage; a producer would wait on parity 1 first (fresh barrier).
  sm90::mbarrier_arrive(&bars[1]);
  const bool released = sm90::mbarrier_try_wait_parity(&bars[1], 0);
  if (tid == 0) sm90::mbarrier_expect_tx(&bars[0], 16);
  // O: registers -> shared (stmatrix) -> global (TMA store).
  sm90::stmatrix_x4(sm90::smem_address(smem + 24576) + sm90::sw128_offset(tid % 16, (tid / 16) * 8),
                    tid, tid + 1, tid + 2, tid + 3);
  sm90::fence_proxy_async_shared();
  __syncthreads();
  if (tid == 0) {
    sm90::tma_store_3d(&map3, smem + 24576, 0, row, head);
    sm90::bulk_commit_group();
    sm90::bulk_wait_group_read<0>();
  }
  out[tid] = released ? 1 : 0;
}

// ---- Warp specialisation: setmaxnreg, named barriers --------------------------------------

// FA3's budgets for one producer and two consumer warpgroups (hopper/flash_fwd_kernel_sm90.h):
// launched with a cap of 65536 / 384 -> 168 registers, the producer gives back down to 24 and
// the consumers take up to 240 (24 + 2 * 240 = 3 * 168). Without the ", 1" of the launch bounds
// ptxas ignores both (info line C7508) and the SASS has no USETMAXREG.
__global__ void __launch_bounds__(384, 1) warp_specialised(float* out, int n) {
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<24>();
    if (threadIdx.x == 0) out[0] = float(n);
  } else {
    sm90::setmaxnreg_inc<240>();
    // Ping-pong between the two consumers: wait for my turn, work, hand the turn over.
    const uint32_t me = 1 + (warpgroup - 1), other = 1 + (2 - warpgroup);
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) {
      sm90::named_barrier_sync(me, 256);
      acc += float(i) * float(threadIdx.x);
      sm90::named_barrier_arrive(other, 256);
    }
    out[threadIdx.x] = acc;
  }
}

// ---- Host: building tensor maps (compiled, not run: tma_map_host_test.cu runs the checks) --

void build_maps(CUtensorMap* q, const void* base, int heads, int n, int d) {
  sm90::make_tensor_map_bhnd(q, base, /*bf16=*/true, heads, n, d, 128);
}
