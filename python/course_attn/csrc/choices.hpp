// The bridge's one reading of the ints that course_attn passes for a lab's choice of kernel: lab 5's
// or lab 8's version (forward(..., version=...)) and lab 7's backward kernel (backward(...,
// kernel=...)). Python turns a name into its int with course_attn/gpu_labs.py, C++ turns the int
// back into the lab's enum with course/gpu_labs.hpp; both read course/gpu_labs.def, so neither
// holds a table of its own. -1 stands for the lab's default (Version::best,
// BackwardKernel::automatic).
//
// Plain C++ (no torch, no Python): grader/gpu/tests/test_gpu_labs.cpp includes it and sends every
// name through Python's table and this decoding.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "course/gpu_labs.hpp"

namespace course_attn {

// Python's int, which may be any size, as the int of a choice (one out of int's range stands for
// none: -2 is outside every list too).
inline int choice_int(std::int64_t value) {
  return value >= course::gpu_labs::kDefaultChoice && value < 1024 ? static_cast<int>(value) : -2;
}

// The version of `options` (a lab's ForwardOptions) that `version` names. A lab without versions
// (lab 4) takes only -1: Python refuses a version for it before any call, so another int here is
// a caller's error.
template <class Options>
void set_version(Options& options, std::int64_t version, const std::string& function) {
  if constexpr (requires { options.version; }) {
    // -1: the version a default ForwardOptions has, Version::best.
    options.version = course::gpu_labs::decode_choice(choice_int(version), Options{}.version, function + ": version");
  } else if (version != course::gpu_labs::kDefaultChoice) {
    throw std::invalid_argument(function + ": this kernel has no versions");
  }
}

// Lab 7's backward kernel that `kernel` names.
inline course::lab7::BackwardKernel backward_kernel(std::int64_t kernel, const std::string& function) {
  return course::gpu_labs::decode_choice(choice_int(kernel), course::lab7::BackwardKernel::automatic,
                                         function + ": kernel");
}

}  // namespace course_attn
