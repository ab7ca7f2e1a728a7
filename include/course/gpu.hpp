// The GPU labs' toolkit: element types, the attention shape, a CUDA error check, a device
// buffer that frees itself, a tile loader, and a seeded generator of normal values on the
// device. Shared by the GPU labs (your code may include it), their solutions, the grader's GPU side, the GPU
// references and the benchmarks.
//
// Host compilers and nvcc both compile this header (no Eigen, no device code outside
// __CUDACC__). Grading trusts nothing in it: the graders draw their inputs on the CPU
// (reference/data.hpp; the speed checks, course/seeded_normal.hpp's stream) and compare on their
// own side.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "course/math_constants.hpp"
#include "course/seeded_normal.hpp"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace course {

// The element type of Q, K, V and O in device memory (arithmetic is fp32 whatever it is). Each
// lab accepts some of them (lab 4: fp32 and bf16; lab 5: bf16 and fp16) and throws
// course::BadInput for the others.
enum class DType : std::uint8_t { fp32, bf16, fp16 };

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
  }
  return "unknown";
}

constexpr std::size_t dtype_bytes(DType t) { return t == DType::fp32 ? 4 : 2; }

// Q is [B, H, Nq, d], K and V are [B, H, Nk, d], O is [B, H, Nq, d], row-major.
struct AttentionShape {
  int B = 1;   // batch
  int H = 1;   // heads
  int Nq = 0;  // query rows per head
  int Nk = 0;  // key/value rows per head
  int d = 0;   // head dimension
};

// What follows has internal linkage (an unnamed namespace): each translation unit has its own
// copy, so no object file linked into a program can stand in for another's at link time.
namespace {

// Throws std::runtime_error naming what failed when a CUDA call did not succeed.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(status));
  }
}

// The streaming multiprocessors of the current GPU (132 on an H100 SXM or H200, 108 on an A100):
// what split counts (lab 6) and persistent grids (lab 8 step 9) are sized by.
inline int multiprocessor_count() {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute(MultiProcessorCount)");
  return sms;
}

// The compute capability of the current GPU as major * 10 + minor: 90 on an H100 or H200, 80 on
// an A100, 89 on an RTX 40 or L4. Labs 8 and 9 run sm_90a code and check for exactly 90.
inline int compute_capability() {
  int device = 0, major = 0, minor = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
             "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
             "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
  return 10 * major + minor;
}

// The least shared memory per block of the GPUs the course builds for (sm_80 and up): 99 KB on
// an RTX 30 (sm_86), an RTX 40 or L4 (sm_89) and an RTX 50 (sm_120). A kernel that asks for more
// needs a smaller tile configuration to fall back to (see shared_memory_per_block below).
constexpr int kSmallestSharedMemoryPerBlock = 101376;

// The dynamic shared memory one block may ask for on the current GPU (the opt-in limit,
// cudaDevAttrMaxSharedMemoryPerBlockOptin): 227 KB on an H100 or H200, 163 KB on an A100,
// 99 KB on an RTX 30 or 40, an L4 or an A10. Labs whose fastest tiles need more than the smaller
// GPUs have pick smaller tiles from it at launch (labs 5 and 7).
//
// COURSE_SHARED_MEMORY_PER_BLOCK=bytes lowers it for this process, so that the tiles an A100
// (166912) or an RTX GPU (101376) would run can be graded on a larger GPU (tools/gpu-check
// small-gpus). It can only lower the limit: a GPU cannot give more than it has.
inline int shared_memory_per_block() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  int limit = 0;
  check_cuda(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  if (const char* lowered = std::getenv("COURSE_SHARED_MEMORY_PER_BLOCK")) {
    char* end = nullptr;
    const long bytes = std::strtol(lowered, &end, 10);
    if (end == lowered || *end != '\0' || bytes <= 0) {
      throw std::runtime_error(std::string("COURSE_SHARED_MEMORY_PER_BLOCK='") + lowered +
                               "' is not a number of bytes (e.g. 101376 for an RTX 4090)");
    }
    if (bytes < limit) limit = static_cast<int>(bytes);
  }
  return limit;
}

// Throws a message a student can act on when a kernel's tiles need more shared memory per block
// than this GPU has, instead of the launch failing with "invalid argument".
inline void require_shared_memory(int bytes, const char* kernel) {
  const int limit = shared_memory_per_block();
  if (bytes > limit) {
    throw std::runtime_error(std::string(kernel) + " needs " + std::to_string(bytes) +
                             " bytes of shared memory per block and this GPU allows " +
                             std::to_string(limit) + " (COURSE_SHARED_MEMORY_PER_BLOCK lowers it)");
  }
}

// A device allocation of `bytes` bytes (at least 1), freed when the buffer goes out of scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    const std::string what = "cudaMalloc(" + std::to_string(bytes) + " bytes)";
    check_cuda(cudaMalloc(&ptr_, bytes ? bytes : 1), what.c_str());
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

  // Copies the host bytes to the start of the buffer (at most bytes() of them).
  void upload(const std::vector<std::uint8_t>& host) {
    const std::size_t n = host.size() < bytes_ ? host.size() : bytes_;
    check_cuda(cudaMemcpy(ptr_, host.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  // The whole buffer, copied to the host.
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> host(bytes_);
    check_cuda(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

#ifdef __CUDACC__
// 16 bytes of fp32, bf16 or fp16 from global memory (16-byte aligned) into fp32 registers: the one
// vectorised load (a single 128-bit transaction per thread) that labs 4 and 6 build their tile
// loads from. E = 4 floats or 8 16-bit values.
__device__ __forceinline__ void load16(const float* src, float* dst) {
  const float4 x = *reinterpret_cast<const float4*>(src);
  dst[0] = x.x;
  dst[1] = x.y;
  dst[2] = x.z;
  dst[3] = x.w;
}

__device__ __forceinline__ void load16(const __nv_bfloat16* src, float* dst) {
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    dst[2 * i] = f.x;
    dst[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ void load16(const __half* src, float* dst) {
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  const __half2* pairs = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(pairs[i]);
    dst[2 * i] = f.x;
    dst[2 * i + 1] = f.y;
  }
}

// E consecutive floats of shared memory (16-byte aligned) into registers, as float4 loads.
template <int E>
__device__ __forceinline__ void load_shared(const float* src, float* dst) {
#pragma unroll
  for (int u = 0; u < E; u += 4) {
    const float4 x = *reinterpret_cast<const float4*>(src + u);
    dst[u] = x.x;
    dst[u + 1] = x.y;
    dst[u + 2] = x.z;
    dst[u + 3] = x.w;
  }
}

// Sum over the G lanes of a group (G divides 32, groups are aligned runs of lanes): every lane
// of the group gets the sum. Lab 6's groups of lanes that read one K or V row share their dot
// products with it.
template <int G>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int offset = G / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// The maximum over the G lanes of a group, as group_sum: every lane of the group gets it.
template <int G>
__device__ __forceinline__ float group_max(float x) {
#pragma unroll
  for (int offset = G / 2; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// One fp32 value stored as fp32, bf16 or fp16 (round to nearest even).
__device__ __forceinline__ void store_one(float* dst, float x) { *dst = x; }
__device__ __forceinline__ void store_one(__nv_bfloat16* dst, float x) { *dst = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store_one(__half* dst, float x) { *dst = __float2half_rn(x); }

// Copies rows [0, ROWS) of a row-major [*, D] block in global memory into a shared fp32 tile with
// row pitch `pitch` (floats), multiplying by `mul`; the THREADS threads of the CTA share the
// 16-byte loads (load16). Rows at or past `valid_rows` are filled with zeros, so that a partial
// tile at the end of a sequence never reads out of bounds. Labs 4 and 7 stage their tiles with it.
template <int ROWS, int D, int THREADS, typename T>
__device__ __forceinline__ void load_rows_fp32(float* tile, int pitch, const T* src, int valid_rows,
                                               float mul = 1.0f) {
  constexpr int kPerLoad = 16 / static_cast<int>(sizeof(T));  // 4 floats or 8 bf16
  constexpr int kLoadsPerRow = D / kPerLoad;
  constexpr int kLoads = ROWS * kLoadsPerRow;
  static_assert(kLoads % THREADS == 0, "tile must split evenly over the CTA");
#pragma unroll
  for (int it = 0; it < kLoads / THREADS; ++it) {
    const int e = static_cast<int>(threadIdx.x) + it * THREADS;
    const int row = e / kLoadsPerRow;
    const int col = (e % kLoadsPerRow) * kPerLoad;
    float x[kPerLoad];
    if (row < valid_rows) {
      load16(src + static_cast<std::int64_t>(row) * D + col, x);
    } else {
#pragma unroll
      for (int u = 0; u < kPerLoad; ++u) x[u] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kPerLoad; u += 4) {
      *reinterpret_cast<float4*>(tile + row * pitch + col + u) =
          make_float4(x[u] * mul, x[u + 1] * mul, x[u + 2] * mul, x[u + 3] * mul);
    }
  }
}

// Programmatic dependent launch (sm_90 and up), for a kernel that only finishes what the kernel
// before it on the stream started (lab 6's merge of the splits). Launched with
// launch_after_previous, it may be scheduled while that kernel's last CTAs still run, so that its
// launch costs no time of its own; it must call wait_for_previous_grid before it reads anything
// the previous kernel wrote (that call returns once the previous grid has finished and its
// writes are visible). The previous kernel calls let_next_grid_launch to say when the next one
// may be scheduled (at its start: the waiting CTAs are small). On older GPUs the three are an
// ordinary launch and two no-ops.
__device__ __forceinline__ void let_next_grid_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// dst[0..3] += v and dst[0..1] += v, each float atomically: how labs 7 and 9 add a CTA's share of
// dQ into the fp32 accumulator that every K/V tile adds to. On sm_90, built with CUDA 12.1 or later,
// one vector atomic (PTX ISA 8.1's red.global.add.v4.f32 / .v2.f32) instead of 4 or 2 scalar ones:
// fewer atomic transactions at L2. Elsewhere (sm_80 and sm_89, or CUDA 12.0, whose headers have no
// vector overloads) each component gets its own atomicAdd(float*, float). The two give the same
// sums up to the order of the float additions, and atomics never fix that order anyway: the
// vector forms, too, are atomic per float only, and the CTAs of the other K/V tiles add to the
// same elements in whatever order they get there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 1))
#define COURSE_HAS_VECTOR_ATOMIC_ADD 1
#else
#define COURSE_HAS_VECTOR_ATOMIC_ADD 0
#endif

__device__ __forceinline__ void atomic_add_4(float* dst, float4 v) {
#if COURSE_HAS_VECTOR_ATOMIC_ADD
  atomicAdd(reinterpret_cast<float4*>(dst), v);
#else
  atomicAdd(dst, v.x);
  atomicAdd(dst + 1, v.y);
  atomicAdd(dst + 2, v.z);
  atomicAdd(dst + 3, v.w);
#endif
}

__device__ __forceinline__ void atomic_add_2(float* dst, float2 v) {
#if COURSE_HAS_VECTOR_ATOMIC_ADD
  atomicAdd(reinterpret_cast<float2*>(dst), v);
#else
  atomicAdd(dst, v.x);
  atomicAdd(dst + 1, v.y);
#endif
}

template <typename Params>
void launch_after_previous(void (*kernel)(Params), dim3 grid, dim3 block, cudaStream_t stream, const Params& params,
                           const char* what) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute overlap[1];
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  if (compute_capability() >= 90) {  // an older GPU gets an ordinary launch
    config.attrs = overlap;
    config.numAttrs = 1;
  }
  check_cuda(cudaLaunchKernelEx(&config, kernel, params), what);
}

// Seeded inputs for timing and benchmarks, drawn on the device: element i of a buffer is a
// function of (seed, i) only (course/seeded_normal.hpp), so a seed gives the same values whatever
// the launch shape, and the host can draw them too. (The graders' correctness checks draw their
// inputs on the CPU with reference/data.hpp instead.)
template <class T>
__global__ void fill_normal_kernel(T* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    x[i] = T(seeded_normal(seed, std::uint64_t(i)));
}

// Fills x[0, count) with standard normal values drawn from `seed`, on `stream`, without
// synchronising. T: float, __nv_bfloat16 or __half (the values are rounded to it).
template <class T>
void fill_normal(T* x, std::int64_t count, std::uint64_t seed, cudaStream_t stream = nullptr) {
  fill_normal_kernel<<<1024, 256, 0, stream>>>(x, count, seed);
  check_cuda(cudaGetLastError(), "fill_normal_kernel<<<...>>>");
}
#endif  // __CUDACC__

}  // namespace
}  // namespace course
