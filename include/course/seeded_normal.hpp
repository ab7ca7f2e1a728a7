// The seeded standard normal values of course::fill_normal, as a function of (seed, element
// index) only, for the host and the device alike: the device fills timing and benchmark inputs
// with it (course/gpu.hpp), and the graders' speed checks draw the same values on the CPU to
// check what a timed kernel computed, without trusting the lab process to report its inputs.
// Host and device logf/cosf may differ in the last bit of an fp32 value, which rounding to a
// 16-bit type nearly always hides; a check of the outputs must allow for it (a few elements of a
// million may differ by one bf16 ulp).
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define COURSE_HOST_DEVICE __host__ __device__
#else
#define COURSE_HOST_DEVICE
#endif

namespace course {

// SplitMix64's output function: a counter-based hash whose outputs pass as independent uniform bits.
COURSE_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Element i of the stream drawn from `seed`: Box-Muller on two 24-bit uniforms of one hash,
// u1 in (0, 1] (k + 0.5 for the top 24-bit k rounds to 2^24 in fp32): never 0, so log(u1) is
// finite.
COURSE_HOST_DEVICE inline float seeded_normal(std::uint64_t seed, std::uint64_t i) {
  constexpr float kTwoPi = 6.2831853f;
  const std::uint64_t h = splitmix64(seed * 0x100000001B3ull + i);
  const float u1 = (float((h >> 11) & ((1ull << 24) - 1)) + 0.5f) / float(1 << 24);
  const float u2 = float(h >> 40) / float(1 << 24);
  return sqrtf(-2.0f * logf(u1)) * cosf(kTwoPi * u2);
}

}  // namespace course

#undef COURSE_HOST_DEVICE
