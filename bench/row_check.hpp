// What the GPU benchmarks share about a row's correctness figure (bench/README.md, "Status"): an
// output read back as floats, and the status that its error against the fp64 reference gives.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "course/gpu.hpp"  // check_cuda
#include "tolerances.hpp"  // grader/common: the sanity limit of a benchmark row

namespace bench {

// `count` bf16 (or, with bf16 false, fp32) elements at `device`, read on `stream` once its
// earlier work has finished, as floats.
inline std::vector<float> download_as_float(const void* device, std::size_t count, bool bf16,
                                            cudaStream_t stream) {
  std::vector<float> out(count);
  if (bf16) {
    std::vector<__nv_bfloat16> raw(count);
    course::check_cuda(cudaMemcpyAsync(raw.data(), device, count * 2, cudaMemcpyDeviceToHost, stream), "copy to host");
    course::check_cuda(cudaStreamSynchronize(stream), "copy to host");
    for (std::size_t i = 0; i < count; ++i) out[i] = __bfloat162float(raw[i]);
  } else {
    course::check_cuda(cudaMemcpyAsync(out.data(), device, count * 4, cudaMemcpyDeviceToHost, stream), "copy to host");
    course::check_cuda(cudaStreamSynchronize(stream), "copy to host");
  }
  return out;
}

// The status of a row whose max error against fp64 is `err` in `dtype` ("bf16" or "fp32"):
// "nonfinite" for NaN (an output that is not finite), "wrong" over grading::benchmark_sanity_limit,
// else "ok".
inline std::string error_status(double err, const std::string& dtype) {
  if (std::isnan(err)) return "nonfinite";
  if (err > grading::benchmark_sanity_limit(dtype)) return "wrong";
  return "ok";
}

}  // namespace bench
