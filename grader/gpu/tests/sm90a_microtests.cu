// Device micro-tests of the Hopper toolkit (include/course/mma_sm90.cuh): each test runs one
// mechanism of lab 8 in isolation on an sm_90 GPU and compares with the CPU, so that a mistake in
// a wrapper, a descriptor or a protocol shows here, named, rather than as wrong attention output.
// tools/gpu-check sm90a builds and runs them, and runs them under the sanitizers; by hand:
//
//   nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Iinclude \
//        grader/gpu/tests/sm90a_microtests.cu -o sm90a_microtests && ./sm90a_microtests
//   compute-sanitizer --tool memcheck ./sm90a_microtests      (and --tool racecheck, synccheck)
//
//   1  wgmma SS, K-major, 128B swizzle: S = Q K^T for N = 64 and 176 keys, d = 64 and 128, bf16
//      and fp16. Checks the descriptor (start, SBO, swizzle mode), the k-step advance by 32 bytes
//      inside a swizzle atom, the jump to the second 64-column block at d = 128, the plain-store
//      swizzle (sw128_tile_offset) + fence.proxy.async path, and the accumulator layout
//      (acc_row / acc_col): every element of S is compared.
//   2  wgmma RS, B MN-major (trans-b = 1): O = P V with P's A fragments built in registers and V
//      [keys][d] in 64-column blocks; d = 64 and 128 (the second block is reached through LBO).
//   3  mbarrier parity: a fresh barrier reports parity 1 complete and parity 0 not; after its one
//      expected arrival, the reverse.
//   4  TMA load of a [heads][N][d] tensor, 128B swizzle, box 64 rows x 64 columns, two boxes for
//      d = 128, a box hanging over the end of the head: the data lands where sw128_tile_offset
//      says, the rows past N are zeros (not the next head), and the barrier completes with
//      expect_tx = the full box bytes.
//   5  TMA store of a 64 x 64 tile over the end of a head: the rows past N are not written.
//   6  A warp-specialised pipeline: 1 producer warpgroup (setmaxnreg.dec 24, one elected thread
//      issuing TMA into 2 stages) and 2 consumer warpgroups (setmaxnreg.inc 240) that sum each
//      tile and release the stage: the full/empty barrier protocol with the producer's start
//      parity 1, over 37 tiles (several wraps of the phase bit).
//   7  elect.sync elects exactly one lane per warp.
// Every wait has a time limit: a wrong protocol reports FAIL (timeout) instead of hanging.
// Prints one line per check and "N passed, M failed"; exit status 1 if any failed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "course/mma_sm90.cuh"

namespace sm90 = course::sm90;

#define CHECK_CUDA(x)                                                                      \
  do {                                                                                     \
    cudaError_t err_ = (x);                                                                \
    if (err_ != cudaSuccess) {                                                             \
      std::printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, __LINE__, \
                  cudaGetErrorString(err_));                                               \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

int g_passed = 0, g_failed = 0;
void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  ok ? ++g_passed : ++g_failed;
}

// Small integers are exact in bf16 and fp16, and their dot products of length <= 176 are exact
// in fp32: the GPU result must equal the CPU's exactly.
float small_int(uint32_t i, uint32_t salt) {
  uint32_t x = i * 2654435761u + salt * 40503u;
  x ^= x >> 13;
  return float(int(x % 7) - 3);
}

template <class T>
T to_t(float f) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16(f);
  else return __float2half(f);
}

}  // namespace

// ---- device helpers ---------------------------------------------------------------------

__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<unsigned char*>((a + 1023) & ~uintptr_t(1023));
}

// Wait for a phase with a time limit (about 2 s at H200 clocks); false and *timed_out = 1 on expiry.
__device__ bool wait_or_time_out(uint64_t* bar, uint32_t parity, int* timed_out) {
  const long long start = clock64();
  while (!sm90::mbarrier_try_wait_parity(bar, parity)) {
    if (clock64() - start > 4000000000LL) {
      atomicExch(timed_out, 1);
      return false;
    }
  }
  return true;
}

template <class T>
__device__ __forceinline__ uint32_t pack2(T lo, T hi) {
  const uint32_t l = *reinterpret_cast<const uint16_t*>(&lo);
  const uint32_t h = *reinterpret_cast<const uint16_t*>(&hi);
  return l | (h << 16);
}

// ---- 1: wgmma SS, S = Q K^T --------------------------------------------------------------

// q [64][D], k [N][D] row-major in global memory; s [64][N].
template <int N, int D, class T>
__global__ void __launch_bounds__(128) test_wgmma_ss(const T* q, const T* k, float* s) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* qs = align1024(smem_raw);
  unsigned char* ks = qs + 64 * D * 2;  // 64 * D * 2 is a multiple of 1024
  const int tid = threadIdx.x;
  for (int i = tid; i < 64 * D; i += 128)
    *reinterpret_cast<T*>(qs + sm90::sw128_tile_offset<64>(i / D, i % D)) = q[i];
  for (int i = tid; i < N * D; i += 128)
    *reinterpret_cast<T*>(ks + sm90::sw128_tile_offset<N>(i / D, i % D)) = k[i];
  sm90::fence_proxy_async_shared();  // st.shared (generic proxy) -> wgmma reads (async proxy)
  __syncthreads();

  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t a_off = (kk / 4) * (64 * 128) + (kk % 4) * 32;
    const uint32_t b_off = (kk / 4) * (N * 128) + (kk % 4) * 32;
    sm90::wgmma_ss<N, T>(d, sm90::desc_k_major_sw128(sm90::smem_address(qs) + a_off),
                         sm90::desc_k_major_sw128(sm90::smem_address(ks) + b_off), kk > 0);
  }
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_operand(d);
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s[sm90::acc_row(tid, i) * N + sm90::acc_col(tid, i)] = d[i];
}

template <int N, int D, class T>
void run_wgmma_ss(const char* type_name) {
  std::vector<T> hq(64 * D), hk(N * D);
  std::vector<float> fq(64 * D), fk(N * D), ref(64 * N, 0.0f), got(64 * N, -12345.0f);
  for (int i = 0; i < 64 * D; ++i) hq[i] = to_t<T>(fq[i] = small_int(i, 1));
  for (int i = 0; i < N * D; ++i) hk[i] = to_t<T>(fk[i] = small_int(i, 2));
  for (int r = 0; r < 64; ++r)
    for (int n = 0; n < N; ++n) {
      float acc = 0;
      for (int c = 0; c < D; ++c) acc += fq[r * D + c] * fk[n * D + c];
      ref[r * N + n] = acc;
    }
  T *dq, *dk;
  float* ds;
  CHECK_CUDA(cudaMalloc(&dq, hq.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dk, hk.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&ds, got.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dq, hq.data(), hq.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, hk.data(), hk.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(ds, got.data(), got.size() * sizeof(float), cudaMemcpyHostToDevice));
  const int smem = (64 + N) * D * 2 + 1024;
  CHECK_CUDA(cudaFuncSetAttribute(test_wgmma_ss<N, D, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  test_wgmma_ss<N, D, T><<<1, 128, smem>>>(dq, dk, ds);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(got.data(), ds, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0, first = -1;
  for (int i = 0; i < 64 * N; ++i)
    if (got[i] != ref[i]) {
      if (first < 0) first = i;
      ++bad;
    }
  char msg[256];
  if (bad)
    std::snprintf(msg, sizeof msg, "wgmma SS K-major N=%d d=%d %s: %d of %d wrong, first S[%d][%d] = %g, expected %g",
                  N, D, type_name, bad, 64 * N, first / N, first % N, got[first], ref[first]);
  else
    std::snprintf(msg, sizeof msg, "wgmma SS K-major N=%d d=%d %s: all %d elements exact", N, D, type_name, 64 * N);
  report(bad == 0, msg);
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(ds);
}

// ---- 2: wgmma RS, O = P V with V MN-major -------------------------------------------------

// p [64][KN], v [KN][D] row-major in global memory; o [64][D].
template <int KN, int D, class T>
__global__ void __launch_bounds__(128) test_wgmma_rs(const T* p, const T* v, float* o) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* vs = align1024(smem_raw);
  const int tid = threadIdx.x;
  for (int i = tid; i < KN * D; i += 128)
    *reinterpret_cast<T*>(vs + sm90::sw128_tile_offset<KN>(i / D, i % D)) = v[i];
  sm90::fence_proxy_async_shared();
  __syncthreads();

  // P's A fragments, in the layout of section 3: row 16w + g (+8), columns 2q (+1) (+8).
  const int w = tid / 32, g = (tid % 32) / 4, qd = tid % 4, row = 16 * w + g;
  uint32_t a[KN / 16][4];
#pragma unroll
  for (int kk = 0; kk < KN / 16; ++kk) {
    const int c = 16 * kk + 2 * qd;
    a[kk][0] = pack2(p[row * KN + c], p[row * KN + c + 1]);
    a[kk][1] = pack2(p[(row + 8) * KN + c], p[(row + 8) * KN + c + 1]);
    a[kk][2] = pack2(p[row * KN + c + 8], p[row * KN + c + 9]);
    a[kk][3] = pack2(p[(row + 8) * KN + c + 8], p[(row + 8) * KN + c + 9]);
  }
  float d[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) d[i] = 0.0f;
  sm90::wgmma_fence();  // the A registers were just written: fence before wgmma reads them
#pragma unroll
  for (int kk = 0; kk < KN / 16; ++kk)
    sm90::wgmma_rs<D, T, /*trans_b=*/1>(d, a[kk],
                                        sm90::desc_mn_major_sw128(sm90::smem_address(vs) + kk * 2048, KN * 128),
                                        kk > 0);
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_operand(d);
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[sm90::acc_row(tid, i) * D + sm90::acc_col(tid, i)] = d[i];
}

template <int KN, int D, class T>
void run_wgmma_rs(const char* type_name) {
  std::vector<T> hp(64 * KN), hv(KN * D);
  std::vector<float> fp(64 * KN), fv(KN * D), ref(64 * D), got(64 * D, -12345.0f);
  for (int i = 0; i < 64 * KN; ++i) hp[i] = to_t<T>(fp[i] = small_int(i, 3));
  for (int i = 0; i < KN * D; ++i) hv[i] = to_t<T>(fv[i] = small_int(i, 4));
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < D; ++c) {
      float acc = 0;
      for (int j = 0; j < KN; ++j) acc += fp[r * KN + j] * fv[j * D + c];
      ref[r * D + c] = acc;
    }
  T *dp, *dv;
  float* dout;
  CHECK_CUDA(cudaMalloc(&dp, hp.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dv, hv.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dout, got.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dp, hp.data(), hp.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, hv.data(), hv.size() * sizeof(T), cudaMemcpyHostToDevice));
  const int smem = KN * D * 2 + 1024;
  CHECK_CUDA(cudaFuncSetAttribute(test_wgmma_rs<KN, D, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  test_wgmma_rs<KN, D, T><<<1, 128, smem>>>(dp, dv, dout);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(got.data(), dout, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0, first = -1;
  for (int i = 0; i < 64 * D; ++i)
    if (got[i] != ref[i]) {
      if (first < 0) first = i;
      ++bad;
    }
  char msg[256];
  if (bad)
    std::snprintf(msg, sizeof msg, "wgmma RS, V MN-major, keys=%d d=%d %s: %d of %d wrong, first O[%d][%d] = %g, expected %g",
                  KN, D, type_name, bad, 64 * D, first / D, first % D, got[first], ref[first]);
  else
    std::snprintf(msg, sizeof msg, "wgmma RS, V MN-major, keys=%d d=%d %s: all %d elements exact", KN, D, type_name, 64 * D);
  report(bad == 0, msg);
  cudaFree(dp);
  cudaFree(dv);
  cudaFree(dout);
}

// ---- 3: mbarrier parity ------------------------------------------------------------------

__global__ void test_parity(int* res) {
  __shared__ __align__(8) uint64_t bar;
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(&bar, 1);
    sm90::fence_mbarrier_init();
    res[0] = sm90::mbarrier_try_wait_parity(&bar, 1);  // the phase "before" phase 0: complete
    res[1] = sm90::mbarrier_try_wait_parity(&bar, 0);  // phase 0: still waiting for its arrival
    sm90::mbarrier_arrive(&bar);
    res[2] = sm90::mbarrier_try_wait_parity(&bar, 0);  // phase 0 complete now
    res[3] = sm90::mbarrier_try_wait_parity(&bar, 1);  // phase 1 began, incomplete
  }
}

void run_parity() {
  int* dres;
  CHECK_CUDA(cudaMalloc(&dres, 4 * sizeof(int)));
  CHECK_CUDA(cudaMemset(dres, 0xff, 4 * sizeof(int)));
  test_parity<<<1, 32>>>(dres);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int res[4];
  CHECK_CUDA(cudaMemcpy(res, dres, sizeof res, cudaMemcpyDeviceToHost));
  char msg[200];
  std::snprintf(msg, sizeof msg,
                "mbarrier parity: fresh barrier parity1=%d parity0=%d; after its arrival parity0=%d parity1=%d "
                "(expected 1 0 1 0)",
                res[0], res[1], res[2], res[3]);
  report(res[0] == 1 && res[1] == 0 && res[2] == 1 && res[3] == 0, msg);
  cudaFree(dres);
}

// ---- 4: TMA load over the end of a head ---------------------------------------------------

// Loads rows row0 .. row0+63 of head `head`, all 128 columns (two boxes), into a swizzled tile,
// then writes it out in logical order.
__global__ void test_tma_load(const __grid_constant__ CUtensorMap map, int row0, int head,
                              __nv_bfloat16* out, int* timed_out) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* tile = align1024(smem_raw);
  __shared__ __align__(8) uint64_t bar;
  if (threadIdx.x == 0) {
    sm90::prefetch_tensormap(&map);
    sm90::mbarrier_init(&bar, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sm90::mbarrier_arrive_expect_tx(&bar, 2 * 64 * 64 * 2);  // both boxes, in full
    sm90::tma_load_3d(tile, &map, &bar, 0, row0, head);
    sm90::tma_load_3d(tile + 64 * 128, &map, &bar, 64, row0, head);
  }
  if (!wait_or_time_out(&bar, 0, timed_out)) return;
  for (int i = threadIdx.x; i < 64 * 128; i += blockDim.x)
    out[i] = *reinterpret_cast<const __nv_bfloat16*>(tile + sm90::sw128_tile_offset<64>(i / 128, i % 128));
}

float tma_value(int h, int r, int c) { return float((h * 131 + r * 7 + c) % 251 - 125); }

void run_tma_load() {
  const int heads = 3, n = 100, d = 128, row0 = 64, head = 1;
  std::vector<__nv_bfloat16> h(heads * n * d);
  for (int hh = 0; hh < heads; ++hh)
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < d; ++c) h[(hh * n + r) * d + c] = __float2bfloat16(tma_value(hh, r, c));
  __nv_bfloat16 *dsrc, *dout;
  int* dflag;
  CHECK_CUDA(cudaMalloc(&dsrc, h.size() * 2));
  CHECK_CUDA(cudaMalloc(&dout, 64 * 128 * 2));
  CHECK_CUDA(cudaMalloc(&dflag, sizeof(int)));
  CHECK_CUDA(cudaMemset(dflag, 0, sizeof(int)));
  CHECK_CUDA(cudaMemset(dout, 0x7f, 64 * 128 * 2));  // bf16 0x7f7f: a large number, not 0
  CHECK_CUDA(cudaMemcpy(dsrc, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  alignas(128) CUtensorMap map;
  sm90::make_tensor_map_bhnd(&map, dsrc, true, heads, n, d, 64);
  const int smem = 64 * 128 * 2 + 1024;
  test_tma_load<<<1, 128, smem>>>(map, row0, head, dout, dflag);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int flag = 0;
  std::vector<__nv_bfloat16> got(64 * 128);
  CHECK_CUDA(cudaMemcpy(&flag, dflag, sizeof flag, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(got.data(), dout, got.size() * 2, cudaMemcpyDeviceToHost));
  if (flag) {
    report(false, "TMA load: the barrier never completed with expect_tx = full box bytes (does a partly "
                  "out-of-bounds box count only its in-bounds bytes?)");
  } else {
    int wrong_in = 0, wrong_oob = 0;
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 128; ++c) {
        const float v = __bfloat162float(got[r * 128 + c]);
        if (row0 + r < n) wrong_in += v != tma_value(head, row0 + r, c);
        else wrong_oob += v != 0.0f;
      }
    char msg[240];
    std::snprintf(msg, sizeof msg,
                  "TMA load, 128B swizzle, box 64x64 x2, rows %d..%d of a %d-row head: %d in-bounds elements "
                  "misplaced, %d out-of-bounds elements not zero",
                  row0, row0 + 63, n, wrong_in, wrong_oob);
    report(wrong_in == 0 && wrong_oob == 0, msg);
  }
  cudaFree(dsrc);
  cudaFree(dout);
  cudaFree(dflag);
}

// ---- 5: TMA store over the end of a head ---------------------------------------------------

__global__ void test_tma_store(const __grid_constant__ CUtensorMap map, int row0, int head) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* tile = align1024(smem_raw);
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x)
    *reinterpret_cast<__nv_bfloat16*>(tile + sm90::sw128_offset(i / 64, i % 64)) =
        __float2bfloat16(float((i / 64) * 3 + (i % 64) % 17));
  sm90::fence_proxy_async_shared();  // st.shared -> TMA reads
  __syncthreads();
  if (threadIdx.x == 0) {
    sm90::tma_store_3d(&map, tile, 0, row0, head);
    sm90::bulk_commit_group();
    sm90::bulk_wait_group_read<0>();
  }
}

void run_tma_store() {
  const int heads = 2, n = 100, d = 64, row0 = 64, head = 0;
  const float sentinel = -7.0f;
  std::vector<__nv_bfloat16> h(heads * n * d, __float2bfloat16(sentinel));
  __nv_bfloat16* dst;
  CHECK_CUDA(cudaMalloc(&dst, h.size() * 2));
  CHECK_CUDA(cudaMemcpy(dst, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  alignas(128) CUtensorMap map;
  sm90::make_tensor_map_bhnd(&map, dst, true, heads, n, d, 64);
  test_tma_store<<<1, 128, 64 * 64 * 2 + 1024>>>(map, row0, head);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(h.data(), dst, h.size() * 2, cudaMemcpyDeviceToHost));
  int wrong = 0, clobbered = 0;
  for (int hh = 0; hh < heads; ++hh)
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < d; ++c) {
        const float v = __bfloat162float(h[(hh * n + r) * d + c]);
        const bool stored = hh == head && r >= row0;
        if (stored) wrong += v != float((r - row0) * 3 + c % 17);
        else clobbered += v != sentinel;
      }
  char msg[200];
  std::snprintf(msg, sizeof msg,
                "TMA store of rows %d..%d into a %d-row head: %d stored elements wrong, %d elements outside the "
                "box's in-bounds part changed",
                row0, row0 + 63, n, wrong, clobbered);
  report(wrong == 0 && clobbered == 0, msg);
  cudaFree(dst);
}

// ---- 6: a warp-specialised TMA pipeline -----------------------------------------------------

constexpr int kStages = 2;
constexpr int kTileRows = 64;  // one box: 64 rows x 64 columns of a [1][n][64] tensor

__global__ void __launch_bounds__(384, 1) test_pipeline(const __grid_constant__ CUtensorMap map, int tiles,
                                                        float* sums, int* timed_out) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stage0 = align1024(smem_raw);
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);   // the producer's arrive.expect_tx
      sm90::mbarrier_init(&empty[s], 8);  // one arrival per consumer warp
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<24>();
    if (threadIdx.x < 32 && sm90::elect_one_sync()) {
      for (int t = 0; t < tiles; ++t) {
        const int s = t % kStages;
        const uint32_t phase = (t / kStages) & 1;
        // A stage is free once its previous use was released; on the first pass there was none,
        // and parity phase ^ 1 = 1 on a fresh barrier returns at once.
        if (!wait_or_time_out(&empty[s], phase ^ 1, timed_out)) return;
        sm90::mbarrier_arrive_expect_tx(&full[s], kTileRows * 64 * 2);
        sm90::tma_load_3d(stage0 + s * kTileRows * 128, &map, &full[s], 0, t * kTileRows, 0);
      }
    }
  } else {
    sm90::setmaxnreg_inc<240>();
    const int ct = threadIdx.x - 128;  // 0..255
    float acc = 0.0f;
    for (int t = 0; t < tiles; ++t) {
      const int s = t % kStages;
      if (!wait_or_time_out(&full[s], (t / kStages) & 1, timed_out)) return;
      const unsigned char* tile = stage0 + s * kTileRows * 128;
      for (int i = ct; i < kTileRows * 64; i += 256)
        acc += __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(tile + sm90::sw128_offset(i / 64, i % 64)));
      __syncwarp();
      if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(&empty[s]);
    }
    sums[ct] = acc;
  }
}

void run_pipeline() {
  const int tiles = 37, n = tiles * kTileRows - 5;  // the last tile hangs over the end
  std::vector<__nv_bfloat16> h(n * 64);
  double ref = 0;
  for (int i = 0; i < n * 64; ++i) {
    const float v = small_int(i, 5);
    h[i] = __float2bfloat16(v);
    ref += v;
  }
  __nv_bfloat16* dsrc;
  float* dsums;
  int* dflag;
  CHECK_CUDA(cudaMalloc(&dsrc, h.size() * 2));
  CHECK_CUDA(cudaMalloc(&dsums, 256 * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dflag, sizeof(int)));
  CHECK_CUDA(cudaMemset(dflag, 0, sizeof(int)));
  CHECK_CUDA(cudaMemset(dsums, 0, 256 * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dsrc, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  alignas(128) CUtensorMap map;
  sm90::make_tensor_map_bhnd(&map, dsrc, true, 1, n, 64, kTileRows);
  const int smem = kStages * kTileRows * 128 + 1024;
  test_pipeline<<<1, 384, smem>>>(map, tiles, dsums, dflag);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int flag = 0;
  std::vector<float> sums(256);
  CHECK_CUDA(cudaMemcpy(&flag, dflag, sizeof flag, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(sums.data(), dsums, 256 * sizeof(float), cudaMemcpyDeviceToHost));
  double total = 0;
  for (float s : sums) total += s;
  char msg[200];
  std::snprintf(msg, sizeof msg,
                "warp-specialised pipeline, %d stages, %d tiles (setmaxnreg 24/240): %s, sum %.0f, expected %.0f",
                kStages, tiles, flag ? "TIMED OUT" : "completed", total, ref);
  report(!flag && total == ref, msg);
  cudaFree(dsrc);
  cudaFree(dsums);
  cudaFree(dflag);
}

// ---- 7: elect.sync ------------------------------------------------------------------------

__global__ void test_elect(int* count) {
  if (sm90::elect_one_sync()) atomicAdd(&count[threadIdx.x / 32], 1);
}

void run_elect() {
  int* dcount;
  CHECK_CUDA(cudaMalloc(&dcount, 4 * sizeof(int)));
  CHECK_CUDA(cudaMemset(dcount, 0, 4 * sizeof(int)));
  test_elect<<<1, 128>>>(dcount);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int c[4];
  CHECK_CUDA(cudaMemcpy(c, dcount, sizeof c, cudaMemcpyDeviceToHost));
  char msg[120];
  std::snprintf(msg, sizeof msg, "elect.sync: leaders per warp %d %d %d %d (expected 1 each)", c[0], c[1], c[2], c[3]);
  report(c[0] == 1 && c[1] == 1 && c[2] == 1 && c[3] == 1, msg);
  cudaFree(dcount);
}

int main() {
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9) {
    std::printf("these tests need an sm_90 GPU (H100/H200)\n");
    return 2;
  }
  run_parity();
  run_elect();
  run_wgmma_ss<64, 64, __nv_bfloat16>("bf16");
  run_wgmma_ss<64, 128, __nv_bfloat16>("bf16");
  run_wgmma_ss<176, 128, __nv_bfloat16>("bf16");
  run_wgmma_ss<192, 64, __half>("fp16");
  run_wgmma_rs<64, 64, __nv_bfloat16>("bf16");
  run_wgmma_rs<128, 128, __nv_bfloat16>("bf16");
  run_wgmma_rs<176, 128, __half>("fp16");
  run_tma_load();
  run_tma_store();
  run_pipeline();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
