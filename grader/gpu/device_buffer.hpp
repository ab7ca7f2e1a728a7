// A device allocation that frees itself, and a CUDA error check that names the call. Plain host
// C++, shared by the grader's side of the GPU labs (gpu_harness.cpp) and the lab process's
// (device_run.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpu_buffer {

// Throws std::runtime_error naming the call when a CUDA call failed.
inline void check_cuda(cudaError_t status, const std::string& call) {
  if (status != cudaSuccess) throw std::runtime_error(call + " failed: " + cudaGetErrorString(status));
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    check_cuda(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  void upload(const std::vector<std::uint8_t>& host) {
    check_cuda(cudaMemcpy(ptr_, host.data(), std::min(host.size(), bytes_), cudaMemcpyHostToDevice),
               "cudaMemcpy to device");
  }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> host(bytes_);
    check_cuda(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

}  // namespace gpu_buffer
