// The Hopper toolkit of the GPU labs: wrappers for the sm_90a instructions of lab 8 -- wgmma,
// TMA (cp.async.bulk.tensor), mbarrier, setmaxnreg, elect.sync, named barriers, stmatrix --
// one PTX instruction per wrapper, each explained, plus the two pieces of arithmetic every Hopper
// kernel needs (the 128-byte swizzle of shared memory and the wgmma matrix descriptor) and a host
// helper that builds TMA tensor maps without linking the driver library. Lab 8 (lecture 8) is
// built from it, the way lab 5 is built from mma_sm80.cuh.
//
// Sections: 1. shared-memory addresses and the 128-byte swizzle; 2. the wgmma matrix
// descriptor; 3. wgmma (fence, commit, wait, and the instructions: wgmma_ss and wgmma_rs call
// the per-shape wrappers of course/wgmma_sm90_generated.cuh, which tools/gen-wgmma-sm90 writes);
// 4. mbarrier; 5. TMA; 6. warp specialisation; 7. the host tensor-map builder.
//
// Tests: grader/gpu/tests/compile_sm90a.cu instantiates every wrapper (tools/check-sm90a-toolkit
// checks the PTX and SASS they become, with no GPU), and grader/gpu/tests/sm90a_microtests.cu runs
// each mechanism below on an H100/H200 against the CPU (tools/gpu-check sm90a): the descriptors
// and k-steps of both operand majors, the fragment layouts, mbarrier parity, TMA zero fill and
// transaction counts, the TMA store's clipping, and a warp-specialised pipeline with setmaxnreg.
//
// Building: device code that includes this file must be compiled for sm_90a only, written
//     nvcc -gencode=arch=compute_90a,code=sm_90a ...
// (checked with nvcc 13.0: the shorthand -arch=sm_90a also runs a plain compute_90 pass, in
// which ptxas rejects wgmma and setmaxnreg; the -gencode form runs only the sm_90a pass). wgmma
// exists only on sm_90a -- not on sm_90, and not on later GPUs (sm_100 has tcgen05 instead);
// setmaxnreg only on architecture-specific targets (sm_90a, sm_100a, sm_120a, ...) -- so any
// other device pass stops at the #error below.
//
// Sources (read, not copied; repository and path):
//   NVIDIA, PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"
//     (wgmma.mma_async and its register fragments, "Shared Memory Matrix Layout", "Matrix
//     Descriptor Format", wgmma.fence / commit_group / wait_group), "mbarrier",
//     "cp.async.bulk.tensor", "setmaxnreg", "elect.sync", "membar/fence" (fence.proxy.async).
//   NVIDIA, CUDA Driver API (cuda.h in the toolkit): cuTensorMapEncodeTiled and its parameter
//     rules; cuda_runtime_api.h: cudaGetDriverEntryPointByVersion.
//   NVIDIA/cutlass: include/cute/arch/mma_sm90_desc.hpp (descriptor bit fields),
//     include/cute/atom/mma_traits_sm90_gmma.hpp (make_gmma_desc: the canonical K-major and
//     MN-major layouts and which stride is LBO/SBO; CLayout_64xN and ALayout_64x16: the
//     fragment layouts), include/cute/arch/mma_sm90_gmma.hpp (operand order of the SS/RS
//     forms), include/cute/arch/copy_sm90_tma.hpp (TMA load syntax),
//     include/cutlass/arch/barrier.h (mbarrier syntax, fence.proxy.async, named barriers),
//     include/cute/arch/cluster_sm90.hpp (elect.sync).
//   Dao-AILab/flash-attention: hopper/flash_fwd_kernel_sm90.h (register budgets of setmaxnreg),
//     hopper/tile_size.h (tile shapes), hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp (the pipeline).
#pragma once

#include <cuda.h>               // CUtensorMap and its enums (types only: nothing here links libcuda)
#include <cudaTypedefs.h>       // PFN_cuTensorMapEncodeTiled_v12000, PFN_cuGetErrorName_v6000
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>  // cudaGetDriverEntryPointByVersion

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "course/mma_sm90.cuh needs sm_90a: compile with -gencode=arch=compute_90a,code=sm_90a (the -arch=sm_90a shorthand also runs a plain sm_90 pass)"
#endif

#include "course/wgmma_sm90_generated.cuh"  // detail::WgmmaShape<N>: the wgmma instructions

namespace course::sm90 {

// ==========================================================================================
// 1. Shared-memory addresses and the 128-byte swizzle
// ==========================================================================================

// The 32-bit shared-state-space address of a generic pointer into shared memory: what every
// instruction below that names shared memory takes.
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The 128-byte swizzle (TMA: CU_TENSOR_MAP_SWIZZLE_128B; wgmma descriptor: swizzle mode 1;
// CuTe: Swizzle<3,4,3> on byte addresses). Shared memory is seen as rows of 128 bytes = eight
// 16-byte chunks; chunk c of row r is stored at chunk c ^ (r % 8). Lab 5's XOR swizzle at
// d = 64 is exactly this map. The hardware (TMA when writing, wgmma when reading) computes it
// from the *address bits* -- bits [4,7) XOR bits [7,10) -- so it only agrees with the formula
// below when the tile starts at a multiple of 1024 bytes (8 rows x 128 B, where the pattern
// repeats). Every swizzled tile of lab 8 is therefore 1024-byte aligned. (The descriptor's
// "base offset" field exists for tiles that are not; we never use it.)
//
// A tile whose rows are longer than 128 bytes (d = 128 in 16-bit: 256 bytes) is stored as
// column blocks of 64 elements: block b holds columns 64b..64b+63 of every row, as its own
// [rows][64] swizzled array, the blocks one after the other. This is how a TMA box of 64
// columns lands (the box's inner size may not exceed the 128-byte swizzle span), and what the
// descriptors below describe.

// Byte offset of 16-bit element (row, col), col < 64, inside one [rows][64] block.
__host__ __device__ constexpr uint32_t sw128_offset(uint32_t row, uint32_t col) {
  return row * 128u + ((((col >> 3) ^ row) & 7u) << 4) + (col & 7u) * 2u;
}

// Byte offset of 16-bit element (row, col) in a tile of kRows rows stored as 64-column blocks.
template <int kRows>
__host__ __device__ constexpr uint32_t sw128_tile_offset(uint32_t row, uint32_t col) {
  return (col >> 6) * (kRows * 128u) + sw128_offset(row, col & 63u);
}

// ==========================================================================================
// 2. The wgmma shared-memory matrix descriptor
// ==========================================================================================
//
// wgmma reads a shared-memory operand through a 64-bit descriptor (PTX ISA, "Matrix Descriptor
// Format" under wgmma's "Shared Memory Matrix Layout"):
//
//   bits 13-0   encode(matrix start address)              encode(x) = (x & 0x3FFFF) >> 4
//   bits 29-16  encode(leading dimension byte offset, LBO)
//   bits 45-32  encode(stride dimension byte offset, SBO)
//   bits 51-49  matrix base offset (0 when the swizzle pattern starts on its repeat boundary,
//               1024 B for the 128-byte swizzle; "valid for all swizzling modes except none")
//   bits 63-62  swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
//   other bits  0
//
// So addresses and offsets are stored in 16-byte units, 14 bits each (the low 4 bits must be 0:
// everything is 16-byte aligned; 18 address bits cover the 228 KB of shared memory).
// (Blackwell's tcgen05 descriptor is different -- a fixed 0b001 at bits 46-48 and the swizzle
// at bits 61-63 with other codes. Do not copy a descriptor from sm_100 code.)
//
// What LBO and SBO mean depends on the operand's major-ness. With the 128-byte swizzle, in the
// canonical layouts that CUTLASS's make_gmma_desc accepts (cute/atom/mma_traits_sm90_gmma.hpp;
// T = 8 16-bit elements = 16 bytes):
//
//   K-major  (the K index is contiguous; A = Q and B = K^T of S = Q K^T -- rows of Q and K
//            are d contiguous elements, i.e. K-contiguous):
//            ((8, m), (T, 2)) : ((8T, SBO), (1, T))
//            Each M/N row is 128 bytes of K; 8 rows make one 1024-byte swizzle atom.
//            SBO = byte distance between consecutive groups of 8 rows (1024 when the rows of
//                  a column block are consecutive, as TMA writes them).
//            LBO = not used by the swizzled K-major layouts: CUTLASS's descriptor comment says
//                  "unused for all SWIZZLE_* layouts (and assumed to be 1)" and make_gmma_desc
//                  writes 1; the PTX ISA's table of strides for tcgen05 (sm_100) says the same
//                  for K-major swizzled layouts. One wgmma's K = 16 slice is 32 bytes of each
//                  row, inside the atom.
//
//   MN-major (the M/N index is contiguous; B = V of O = P V -- V's rows are keys, i.e. K,
//            and its d columns, i.e. N, are contiguous): wgmma with imm-trans-b = 1.
//            ((T, 8, n), (8, k)) : ((1, T, LBO), (8T, SBO))
//            64 N-elements (128 bytes) contiguous per K row; 8 K rows make one atom.
//            LBO = byte distance between consecutive 64-element blocks along N (the column
//                  blocks above: kBlockN * 128 bytes for a V tile of kBlockN keys).
//            SBO = byte distance between consecutive groups of 8 K rows (1024).
//
// Stepping through K. A wgmma consumes K = 16. For a K-major tile the next 16 columns are the
// next 32 bytes of each row: the descriptor of k-step kk is the first one with its start
// address advanced by 32*kk bytes (kk < 4; at kk = 4 the next 64-column block begins, i.e. the
// start moves to the next block). That the hardware applies the swizzle to the advanced address
// -- so that an address 32 bytes into an atom is fine with base offset 0 -- is how CUTLASS's
// DescriptorIterator and FA3 step through K (they add the offset to the descriptor's address
// field), and what micro-test 1 of grader/gpu/tests/sm90a_microtests.cu checks element by
// element. For an MN-major tile the next 16 K rows are 2 atoms further: start address + 2048
// bytes. Micro-test 2 checks the MN-major LBO/SBO reading above and trans-b = 1 for V (at
// d = 128, the only case where LBO is used).

enum class SwizzleMode : uint64_t { none = 0, b128 = 1, b64 = 2, b32 = 3 };

// The 14-bit field value of a byte address or byte offset.
__host__ __device__ constexpr uint64_t desc_encode(uint32_t bytes) {
  return static_cast<uint64_t>((bytes & 0x3FFFFu) >> 4);
}

__host__ __device__ constexpr uint64_t make_smem_desc(uint32_t start_address, uint32_t lbo_bytes,
                                                      uint32_t sbo_bytes, SwizzleMode mode,
                                                      uint32_t base_offset = 0) {
  return desc_encode(start_address) | (desc_encode(lbo_bytes) << 16) |
         (desc_encode(sbo_bytes) << 32) | (static_cast<uint64_t>(base_offset & 7u) << 49) |
         (static_cast<uint64_t>(mode) << 62);
}

// The fields back, for tests and for printing a descriptor while debugging.
__host__ __device__ constexpr uint32_t desc_start_address(uint64_t d) { return uint32_t(d & 0x3FFF) << 4; }
__host__ __device__ constexpr uint32_t desc_lbo(uint64_t d) { return uint32_t((d >> 16) & 0x3FFF) << 4; }
__host__ __device__ constexpr uint32_t desc_sbo(uint64_t d) { return uint32_t((d >> 32) & 0x3FFF) << 4; }
__host__ __device__ constexpr uint32_t desc_base_offset(uint64_t d) { return uint32_t((d >> 49) & 7); }
__host__ __device__ constexpr uint32_t desc_swizzle(uint64_t d) { return uint32_t(d >> 62); }

// K-major operand (Q, K), 128-byte swizzle, rows of one 64-column block consecutive.
__host__ __device__ constexpr uint64_t desc_k_major_sw128(uint32_t start_address) {
  return make_smem_desc(start_address, /*lbo (unused)=*/16, /*sbo=*/1024, SwizzleMode::b128);
}

// MN-major operand (V), 128-byte swizzle; n_block_bytes = distance between 64-column blocks.
__host__ __device__ constexpr uint64_t desc_mn_major_sw128(uint32_t start_address,
                                                           uint32_t n_block_bytes) {
  return make_smem_desc(start_address, /*lbo=*/n_block_bytes, /*sbo=*/1024, SwizzleMode::b128);
}

// The same descriptor with its start address moved by `bytes` (a multiple of 16). Adding to
// the low field is exact while the address stays below 256 KB, which shared memory always is.
__host__ __device__ constexpr uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

// ==========================================================================================
// 3. wgmma: the asynchronous warpgroup matrix multiply
// ==========================================================================================
//
// A warpgroup is 4 consecutive warps whose first warp index is a multiple of 4 (128 threads).
// All 128 threads execute every wgmma instruction together (.sync.aligned: same instruction,
// no divergence). One
//     wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16  d, a, b-desc, scale-d, ...
// computes D (64 x N, fp32) = A (64 x 16) * B (16 x N) + (scale-d ? D : 0): B always from
// shared memory through a descriptor, A either from shared memory (descriptor: the "SS" form)
// or from registers (the "RS" form; then A must be K-major). It only *starts* the product: the
// accumulator registers may not be touched until a wait_group covers it.
//
// Accumulator fragment (PTX ISA figure "WGMMA .m64nNk16 register fragment layout for
// accumulator matrix D"; CUTLASS CLayout_64xN). Thread t of the warpgroup: w = t / 32 (its
// warp in the warpgroup), lane = t % 32, g = lane / 4, q = lane % 4. For j = 0 .. N/8 - 1:
//     d[4j + 0] = D[16w + g    ][8j + 2q]      d[4j + 1] = D[16w + g    ][8j + 2q + 1]
//     d[4j + 2] = D[16w + g + 8][8j + 2q]      d[4j + 3] = D[16w + g + 8][8j + 2q + 1]
// Each warp owns 16 whole rows; inside a warp it is the mma.sync m16n8 C layout of lecture 5,
// repeated N/8 times along N. So a thread holds two rows (g and g + 8), and the 4 lanes of
// quad g hold all of those rows: a row max or sum is the thread's own partial result and two
// __shfl_xor_sync (1 and 2), as in lab 5. No row is split across warps.
//
// A fragment from registers, 16-bit types (CUTLASS ALayout_64x16): four .b32 registers, each
// two elements, the lower column in the low half:
//     a[0] = A[16w + g][2q, 2q+1]      a[1] = A[16w + g + 8][2q, 2q+1]
//     a[2] = A[16w + g][2q+8, 2q+9]    a[3] = A[16w + g + 8][2q+8, 2q+9]
// -- lab 5's mma.sync A layout, warp w taking rows 16w..16w+15. Consequence for O += P V: the
// A fragment of k-step kk (keys 16kk..16kk+15) is S's accumulators d[8kk .. 8kk+7], packed in
// pairs in that order. P never moves between threads.

__host__ __device__ constexpr int acc_row(int thread_in_warpgroup, int i) {
  return 16 * (thread_in_warpgroup / 32) + (thread_in_warpgroup % 32) / 4 + 8 * ((i >> 1) & 1);
}
__host__ __device__ constexpr int acc_col(int thread_in_warpgroup, int i) {
  return 8 * (i >> 2) + 2 * (thread_in_warpgroup % 4) + (i & 1);
}

// wgmma.fence.sync.aligned: orders this warpgroup's earlier register accesses before the
// wgmma.mma_async that follow. The PTX ISA requires it before the first wgmma of a warpgroup,
// and between any access to registers a wgmma uses -- its accumulators, or the registers holding
// an A fragment -- and that wgmma; accumulator accesses by consecutive wgmma of the same shape
// are ordered without it. (It does not order shared memory: see fence_proxy_async_shared below.)
// Without it, the PTX ISA says, the behaviour is undefined.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

// wgmma.commit_group.sync.aligned: closes the wgmma.mma_async issued since the last commit into
// one wgmma-group, which wait_group can then wait for.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// wgmma.wait_group.sync.aligned N: waits until at most N wgmma-groups of this warpgroup are
// still pending. wait<0> = everything issued has completed (accumulators readable, shared
// memory operands no longer read). wait<1> lets the newest group run on: the overlap of
// lecture 8's steps 6 and 7.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(kPending >= 0 && kPending <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Not an instruction: an empty asm that "reads and writes" each accumulator register. The wgmma
// asm statements say they produce d at once; the compiler could therefore move a read of d
// (the softmax) above the wait_group, whose "memory" clobber does not cover registers. Calling
// this right after wgmma_wait_group (and right before the wgmma that write d) pins every use
// of d to its side of the wait. CUTLASS does the same (warpgroup_fence_operand).
template <int kRegs>
__device__ __forceinline__ void fence_operand(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int kRegs>
__device__ __forceinline__ void fence_operand(uint32_t (&r)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// The instructions themselves are detail::WgmmaShape<N>, one specialisation per N, in
// course/wgmma_sm90_generated.cuh (included at the top; tools/gen-wgmma-sm90 writes it). The
// operands, in PTX order:
//   SS:  {d0..d(N/2-1)}, a-desc, b-desc, p, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
//   RS:  {d0..d(N/2-1)}, {a0, a1, a2, a3}, b-desc, p, imm-scale-a, imm-scale-b, imm-trans-b
// p = (scale_d != 0): false means D = A*B (the hardware ignores the old D; C++ still wants d
// initialised, since the asm statement names it as read-write).
// imm-scale-a/-b = 1 (-1 would negate A or B). imm-trans-a/-b = 0 for K-major, 1 for MN-major
// (allowed for .f16/.bf16 only). The predicate is made inside the asm from an int so that the
// caller can pass a run-time flag.

// D (64 x N fp32, N/2 registers a thread) = A * B (+ D if accumulate), A and B in shared memory.
// T: __nv_bfloat16 or __half. kTransA / kTransB: 0 = K-major, 1 = MN-major.
template <int N, class T, int kTransA = 0, int kTransB = 0>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                         bool accumulate) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or fp16");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N is a multiple of 8 in [8, 256]");
  detail::WgmmaShape<N>::template ss<T, kTransA, kTransB>(d, desc_a, desc_b, accumulate ? 1 : 0);
}

// The same with A (64 x 16, K-major) from registers, in the fragment layout drawn above.
template <int N, class T, int kTransB = 0>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                         bool accumulate) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or fp16");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N is a multiple of 8 in [8, 256]");
  detail::WgmmaShape<N>::template rs<T, kTransB>(d, a, desc_b, accumulate ? 1 : 0);
}

// ==========================================================================================
// 4. mbarrier: the shared-memory barrier that TMA completes
// ==========================================================================================
//
// An mbarrier is a 64-bit object in shared memory (8-byte aligned). It counts through phases:
// init(count) starts phase 0 expecting `count` arrivals and 0 transaction bytes. A phase
// completes when all expected arrivals have arrived *and* the transaction count is back to 0;
// the barrier then moves to the next phase and expects `count` arrivals again. Threads wait for
// a phase by its parity (0 for phases 0, 2, 4, ...; 1 for 1, 3, ...).
//
// Transaction bytes are how TMA signals: a thread announces the bytes a copy will deliver
// (expect_tx, usually fused with its arrive), and the copy engine counts them down
// (complete_tx) as data lands. So "phase complete" means "every expected thread arrived and every
// announced byte is in shared memory".
//
// Waiting on parity P returns once the phase with parity P has completed. On a barrier that
// has just been initialised (current phase 0, incomplete), waiting on parity 1 refers to the
// phase *before* it, which counts as complete: it returns at once. That is why a producer,
// whose first wait is on a stage nobody has used yet, starts its "empty" parity at 1 (CUTLASS:
// make_producer_start_state) while consumers start their "full" parity at 0 (micro-tests 3
// and 6).

// mbarrier.init.shared::cta.b64 [bar], count: phase 0, `count` arrivals expected. One thread
// initialises; fence_mbarrier_init and a __syncthreads publish it before anyone uses it.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count)
               : "memory");
}

// fence.mbarrier_init.release.cluster: makes earlier mbarrier.init visible (in particular to the
// copy engine, which signals barriers through the async proxy). The PTX ISA allows only the
// .release.cluster form. CUTLASS: fence_barrier_init.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// mbarrier.arrive.shared::cta.b64 _, [bar]: one arrival (the returned state token is discarded: `_`).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

// mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes: raise the transaction count by
// `bytes`, then arrive. The producer issues this once per stage, for all the TMA copies that
// complete on this barrier, before or after issuing them (the count may go negative for a while).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}

// mbarrier.expect_tx.shared::cta.b64 [bar], bytes: raise the transaction count without arriving.
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity: true once the phase of that parity
// has completed. try_wait may suspend the thread for a while (a time limit of the hardware's
// choosing) before it answers false; test_wait would answer at once.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Wait until the phase of that parity has completed. A wait on the wrong parity either returns
// at once (reading a stage that is not there yet) or never (a hang): lab 8's planted bugs.
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

// ==========================================================================================
// 5. TMA: the bulk tensor copy engine
// ==========================================================================================
//
// A tensor map (CUtensorMap, 128 bytes, built on the host by make_tensor_map_* below) describes
// a global tensor: element type, up to 5 dimensions with their sizes and byte strides, the box
// (tile) one copy moves, and the shared-memory swizzle. One thread issues a copy of a whole box;
// the engine computes the addresses, applies the swizzle, fills elements outside the tensor with
// zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), and counts the bytes down on an mbarrier.
//
// The map is passed to the kernel by value as a `const __grid_constant__ CUtensorMap` parameter
// and referred to by its (generic) address; it must not be copied into local memory.
//
// Coordinates are element indices, innermost dimension first, signed: a box that hangs over
// the end of the tensor is legal, and the part outside is zero-filled. For attention we map
// Q/K/V as 3-D tensors [B*H][N][d] (innermost d), so that rows past N of one head are outside
// the tensor -- zeros -- instead of the next head's rows. The zero-filled bytes count towards
// complete_tx, so a stage always expects the full box's bytes, as CUTLASS and FA3 do (a constant
// transaction byte count per stage; micro-test 4).

// prefetch.tensormap [map]: pull the 128-byte descriptor into the copy engine's cache before the
// first copy that uses it (a latency hint; one thread, at kernel start).
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes
//     [dst], [map, {c0, ...}], [bar]
// Copies the box at coordinates (c0, ...) into shared memory at dst and counts its bytes down on
// bar. dst: 128-byte aligned at least; 1024-byte aligned for the 128-byte swizzle to match
// sw128_offset (see section 1). .shared::cluster with our own CTA's address is our own shared
// memory (no cluster is launched in lab 8). Issued by one thread.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                            int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                            int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                            int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3)
      : "memory");
}

// cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [map, {c0, c1, c2}], [src]
// The other direction (the epilogue: O from shared memory to global). Completion is tracked per
// thread in bulk groups, not on an mbarrier. Elements of the box outside the tensor are not
// written, which is what makes a partial last query tile safe (micro-test 5).
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int c0, int c1,
                                             int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_address(src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// cp.async.bulk.commit_group: close this thread's bulk copies issued so far into a group.
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// cp.async.bulk.wait_group.read N: wait until at most N of this thread's bulk groups still *read*
// their shared-memory source (the source may then be overwritten; the global writes may still be
// in flight, and are complete for other kernels at kernel end).
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// cp.async.bulk.wait_group N: wait until at most N of this thread's bulk groups are still
// pending at all -- their writes done too, not only their reads (the form above). What a
// thread must wait for before it tells another CTA that its bulk writes are there.
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes: the copy
// engine adds `bytes` / 4 consecutive floats of shared memory into global memory, each add
// atomic (as atomicAdd, so CTAs adding into the same rows need no other ordering). One thread
// issues it for a whole block, instead of every thread issuing its own atomics; completion is
// tracked in bulk groups (bulk_commit_group, then bulk_wait_group_read before the source is
// overwritten). src 16-byte aligned, dst 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_address(src)), "r"(bytes)
               : "memory");
}

// fence.proxy.async.shared::cta: orders this thread's earlier ordinary ("generic proxy")
// shared-memory accesses with later accesses by the "async proxy" -- wgmma operand reads, TMA
// reads and writes. Needed (a) in step 1 of lab 8, after Q/K/V were stored into shared memory
// with st.shared and before wgmma reads them, and (b) before a TMA store reads what threads
// wrote. Each writing thread fences, then the threads synchronise, then the async work starts.
// (Shared memory that TMA wrote and an mbarrier wait observed needs no fence for wgmma.)
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ==========================================================================================
// 6. Warp specialisation: registers, elections, named barriers, stmatrix
// ==========================================================================================

// setmaxnreg.{inc,dec}.sync.aligned.u32 N: the executing warp's per-thread register limit
// becomes N (24..256, a multiple of 8). .dec gives registers back to the CTA's pool, .inc
// blocks until the pool has enough. All 4 warps of a warpgroup must execute the same one. It
// takes effect only when the kernel had a register cap at launch (__launch_bounds__(threads, 1)
// with the 1, or -maxrregcount); otherwise ptxas drops it, saying only, at info level, "(C7508)
// Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry"
// (seen with nvcc 13.0; tools/check-sm90a-toolkit fails on that line). FA3's budgets
// (hopper/flash_fwd_kernel_sm90.h): producer 24 and two consumer warpgroups 240 (3 x 128
// threads: 24 + 2*240 = 504 = 3 * 168, the launch cap of 65536 registers / 384 threads rounded
// down to 8), or producer 32 and three consumers 160 (32 + 3*160 = 512 = 4 * 128). New registers
// start with undefined contents.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// elect.sync rd|p, membermask: the lanes of the mask agree on one leader; p is true in the
// leader only. Here the mask is the whole warp, so all 32 lanes must execute the call together
// (as with any .sync instruction). Used to pick the one thread that issues TMA copies; unlike
// (lane == 0) it states in the instruction stream that exactly one lane of a converged warp acts.
__device__ __forceinline__ bool elect_one_sync() {
  uint32_t is_leader;
  asm volatile(
      "{\n.reg .b32 leader;\n.reg .pred p;\n"
      "elect.sync leader|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(is_leader));
  return is_leader != 0;
}

// Named barriers: 16 per CTA, 0 is __syncthreads'. bar.sync id, n waits until n threads (a
// multiple of 32, counted per warp) have arrived at barrier id; bar.arrive id, n arrives without
// waiting. The pair lets two consumer warpgroups pass a token back and forth ("ping-pong",
// lecture 8 step 7): each waits on its own barrier before its GEMMs and arrives on the other's
// after issuing them, with n = 256 (both warpgroups).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16 [addr], {r0, r1, r2, r3}: the inverse of lab 5's
// ldmatrix.x4. Lane 4r + c holds, in register i, row r columns 2c and 2c+1 of 8x8 matrix i (the
// accumulator layout, packed to 16 bits); lanes 8i..8i+7 give the row addresses of matrix i.
// Used to write O into a swizzled shared-memory tile for the TMA store.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// ==========================================================================================
// 7. Host: TMA tensor maps without linking libcuda
// ==========================================================================================
//
// cuTensorMapEncodeTiled is a driver API function. Rather than link -lcuda, we ask the runtime
// for the driver's entry point (cudaGetDriverEntryPointByVersion, the non-deprecated form since
// CUDA 12.5; the function exists since CUDA 12.0, hence the version 12000 and the typedef
// PFN_cuTensorMapEncodeTiled_v12000 of cudaTypedefs.h). Arguments are checked here first, against
// the rules cuda.h documents for cuTensorMapEncodeTiled, so that a mistake names the argument
// instead of coming back as CUDA_ERROR_INVALID_VALUE.

namespace host {

[[noreturn]] inline void tensor_map_error(const std::string& what) {
  throw std::invalid_argument("make_tensor_map: " + what);
}

template <class F>
inline F driver_entry_point(const char* symbol, unsigned int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &status);
#else
  (void)version;
  const cudaError_t err = cudaGetDriverEntryPoint(symbol, &fn, cudaEnableDefault, &status);
#endif
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("cannot reach the CUDA driver to look up ") + symbol + ": " +
                             cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                             "); is an NVIDIA driver installed and a GPU visible?");
  if (status == cudaDriverEntryPointVersionNotSufficent || fn == nullptr)
    throw std::runtime_error(std::string("the CUDA driver has no ") + symbol + " for CUDA " +
                             std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) +
                             " (status " + std::to_string(int(status)) +
                             "): TMA needs a driver for CUDA 12.0 or later and a GPU of compute capability 9.0+");
  return reinterpret_cast<F>(fn);
}

inline std::string cu_result_name(CUresult r) {
  const char* name = nullptr;
  try {
    auto get_name = driver_entry_point<PFN_cuGetErrorName_v6000>("cuGetErrorName", 6000);
    if (get_name(r, &name) != CUDA_SUCCESS) name = nullptr;
  } catch (const std::exception&) {
  }
  return name ? std::string(name) : "CUresult " + std::to_string(int(r));
}

inline uint32_t element_bytes(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: tensor_map_error("unsupported element type " + std::to_string(int(type)) +
                              " (the sub-byte packed types are not handled here)");
  }
}

inline uint32_t swizzle_span_bytes(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
    default: tensor_map_error("only the NONE/32B/64B/128B swizzle modes are handled here");
  }
}

}  // namespace host

// A tiled tensor map. dims[i] elements along dimension i (0 = innermost, contiguous), strides[i]
// the byte stride of dimension i + 1 (rank - 1 values), box[i] elements per copy along i.
// Element strides are all 1, no interleave, L2 promotion 128 B (what CUTLASS's make_tma_copy
// uses by default; a tuning knob, not a correctness one), out-of-bounds fill with zeros.
// Throws std::invalid_argument for arguments that break cuda.h's rules and std::runtime_error
// when the driver cannot be reached or rejects the map.
inline void make_tensor_map(CUtensorMap* map, CUtensorMapDataType type, uint32_t rank,
                            const void* global_address, const uint64_t* dims,
                            const uint64_t* strides_bytes, const uint32_t* box,
                            CUtensorMapSwizzle swizzle) {
  using host::tensor_map_error;
  if (map == nullptr) tensor_map_error("map is null");
  if (reinterpret_cast<uintptr_t>(map) % 64 != 0)
    tensor_map_error("the CUtensorMap object must be 64-byte aligned");
  if (rank < 1 || rank > 5) tensor_map_error("rank must be 1..5, got " + std::to_string(rank));
  if (global_address == nullptr) tensor_map_error("global address is null");
  if (reinterpret_cast<uintptr_t>(global_address) % 16 != 0)
    tensor_map_error("global address must be 16-byte aligned");
  const uint32_t elem = host::element_bytes(type);
  const uint32_t span = host::swizzle_span_bytes(swizzle);
  for (uint32_t i = 0; i < rank; ++i) {
    const std::string dim = "dimension " + std::to_string(i);
    if (dims[i] == 0 || dims[i] > (uint64_t(1) << 32))
      tensor_map_error(dim + ": size must be in [1, 2^32], got " + std::to_string(dims[i]));
    if (box[i] == 0 || box[i] > 256)
      tensor_map_error(dim + ": box size must be in [1, 256], got " + std::to_string(box[i]));
    if (i + 1 < rank) {
      const uint64_t s = strides_bytes[i];
      if (s % 16 != 0 || s >= (uint64_t(1) << 40))
        tensor_map_error("stride of dimension " + std::to_string(i + 1) +
                         " must be a multiple of 16 bytes below 2^40, got " + std::to_string(s));
    }
  }
  const uint64_t inner_bytes = uint64_t(box[0]) * elem;
  if (inner_bytes % 16 != 0)
    tensor_map_error("the box's inner size must be a multiple of 16 bytes, got " +
                     std::to_string(inner_bytes));
  if (span != 0 && inner_bytes > span)
    tensor_map_error("the box's inner size (" + std::to_string(inner_bytes) +
                     " bytes) exceeds the swizzle span (" + std::to_string(span) +
                     " bytes): split the columns into several boxes");

  auto encode = host::driver_entry_point<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);
  cuuint64_t dims_[5], strides_[4];
  cuuint32_t box_[5], element_strides[5];
  for (uint32_t i = 0; i < rank; ++i) {
    dims_[i] = dims[i];
    box_[i] = box[i];
    element_strides[i] = 1;
    if (i + 1 < rank) strides_[i] = strides_bytes[i];
  }
  const CUresult r = encode(map, type, rank, const_cast<void*>(global_address), dims_, strides_, box_,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("make_tensor_map: cuTensorMapEncodeTiled failed: " + host::cu_result_name(r));
}

// The map lab 8 uses for Q, K, V and O: a [heads][n][d] tensor of 16-bit elements (heads = B*H,
// rows of d contiguous elements), boxes of 64 columns x box_rows rows x 1 head, 128-byte swizzle.
// A d = 128 tile takes two copies (column coordinates 0 and 64), landing in the two column blocks
// of section 1. Coordinates of a copy: {column, row, head}.
inline void make_tensor_map_bhnd(CUtensorMap* map, const void* base, bool bf16, uint64_t heads,
                                 uint64_t n, uint64_t d, uint32_t box_rows) {
  const uint64_t dims[3] = {d, n, heads};
  const uint64_t strides[2] = {d * 2, n * d * 2};
  const uint32_t box[3] = {64, box_rows, 1};
  make_tensor_map(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, base,
                  dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace course::sm90
