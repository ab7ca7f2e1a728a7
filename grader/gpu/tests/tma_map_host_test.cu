// Host checks of course::sm90::make_tensor_map (include/course/mma_sm90.cuh): arguments that break
// cuda.h's rules for cuTensorMapEncodeTiled are refused with a message naming the argument, before
// the driver is asked; and the driver function is found through the runtime's entry-point query,
// so that this program links no libcuda. On a machine without a GPU the driver cannot be reached:
// the helper must then say so in words. On a machine with one, a valid [B*H][N][d] map encodes.
// Prints one line per check and "N passed, M failed"; exit status 1 if any failed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "course/mma_sm90.cuh"

namespace {

int passed = 0, failed = 0;

void expect_invalid(const char* what, const std::string& needle, void (*call)()) {
  try {
    call();
    std::printf("FAIL %s: no exception\n", what);
    ++failed;
  } catch (const std::invalid_argument& e) {
    const bool ok = std::string(e.what()).find(needle) != std::string::npos;
    std::printf("%s %s: %s\n", ok ? "ok  " : "FAIL", what, e.what());
    ok ? ++passed : ++failed;
  } catch (const std::exception& e) {
    std::printf("FAIL %s: wrong exception type: %s\n", what, e.what());
    ++failed;
  }
}

alignas(128) CUtensorMap g_map;
alignas(16) unsigned char g_data[4096];

}  // namespace

int main() {
  using course::sm90::make_tensor_map;
  using course::sm90::make_tensor_map_bhnd;
  expect_invalid("box wider than the 128-byte swizzle", "exceeds the swizzle span", [] {
    const uint64_t dims[2] = {128, 16}, strides[1] = {256};
    const uint32_t box[2] = {128, 8};
    make_tensor_map(&g_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, g_data, dims, strides, box,
                    CU_TENSOR_MAP_SWIZZLE_128B);
  });
  expect_invalid("row stride not a multiple of 16 bytes", "multiple of 16 bytes", [] {
    make_tensor_map_bhnd(&g_map, g_data, true, 1, 16, 60, 8);  // d = 60: 120-byte rows
  });
  expect_invalid("global address not 16-byte aligned", "16-byte aligned", [] {
    make_tensor_map_bhnd(&g_map, g_data + 2, true, 1, 16, 64, 8);
  });
  expect_invalid("box of more than 256 rows", "box size must be in [1, 256]", [] {
    make_tensor_map_bhnd(&g_map, g_data, true, 1, 1024, 64, 512);
  });
  expect_invalid("tensor map object not 64-byte aligned", "64-byte aligned", [] {
    make_tensor_map_bhnd(reinterpret_cast<CUtensorMap*>(reinterpret_cast<char*>(&g_map) + 16), g_data, true,
                         1, 16, 64, 8);
  });

  // A valid map: encodes where a driver and GPU are present, or fails with a sentence about the
  // driver (never CUDA_ERROR_INVALID_VALUE, which would mean our checks let a bad argument by).
  int devices = 0;
  const bool have_gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  void* d_ptr = nullptr;
  if (have_gpu && cudaMalloc(&d_ptr, 2 * 3 * 100 * 128 * 2) != cudaSuccess) d_ptr = nullptr;
  try {
    make_tensor_map_bhnd(&g_map, d_ptr ? d_ptr : static_cast<void*>(g_data), true, 6, 100, 128, 128);
    std::printf("%s valid map: encoded (GPU present: %s)\n", have_gpu ? "ok  " : "FAIL",
                have_gpu ? "yes" : "no");
    have_gpu ? ++passed : ++failed;
  } catch (const std::invalid_argument& e) {
    std::printf("FAIL valid map refused: %s\n", e.what());
    ++failed;
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    const bool about_driver = m.find("CUDA driver") != std::string::npos;
    const bool ok = !have_gpu && about_driver;
    std::printf("%s valid map without a usable driver: %s\n", ok ? "ok  " : "FAIL", e.what());
    ok ? ++passed : ++failed;
  }
  if (d_ptr) cudaFree(d_ptr);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
