// Timing a lab 5 kernel the same way for the student's build and the solution's: device
// buffers of non-zero data, warm-up launches, then the median of timed launches (CUDA events).
#pragma once

#include "course/lab5_tensor_core.hpp"

namespace lab5_speed {

struct SpeedConfig {
  int d = 64;
  bool causal = false;
  int N = 4096;                // sequence length; B * N = 16384 tokens, H * d = 2048
  int batch() const { return 16384 / N; }
  int heads() const { return 2048 / d; }
  double flops() const;        // 4 B H N^2 d, halved for causal
};

// Median milliseconds of course::lab5::flash_attention_forward (bf16, Version::best).
double median_ms(const SpeedConfig& c);

}  // namespace lab5_speed
