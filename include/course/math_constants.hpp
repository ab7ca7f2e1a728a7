// Named constants of the exp2 form of the softmax, for host and device code alike (plain
// constexpr scalars: nvcc lets device code use their values directly).
//
// exp(x) = exp2(x * log2(e)): kernels fold log2(e) into the softmax scale once, so that every
// exponential is one exp2 (the hardware's base-2 exponential), and turn a base-2 log-sum-exp
// back into natural log with a single multiplication by ln 2.
#pragma once

#include <numbers>

namespace course {

inline constexpr double kLog2e = std::numbers::log2e;  // log2(e) = 1 / ln 2
inline constexpr double kLn2 = std::numbers::ln2;      // ln 2 = 1 / log2(e)

// The same, rounded once to float, for fp32 kernels.
inline constexpr float kLog2eF = static_cast<float>(kLog2e);
inline constexpr float kLn2F = static_cast<float>(kLn2);

}  // namespace course
