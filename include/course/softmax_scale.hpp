// The softmax scale tau of S = tau Q K^T (FA1 Algorithm 2, line 10; Algorithm 1 has none): its one rule and its one
// default, for every lab, reference and grader of the course.
//
// A caller that gives no scale gets tau = 1/sqrt(d); a scale given must be finite and greater
// than 0. "No scale" is spelt the way each side of the course can carry it: std::nullopt in the
// CPU labs' options (std::optional<double>), and 0 in the GPU labs' options (a plain float, as
// the lab process's wire and the PyTorch bridge carry them).
//
// Plain C++ without CUDA or Eigen, so that the CPU labs include it too.
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include "course/errors.hpp"

namespace course {

// 1/sqrt(d): the scale when none is given.
inline double default_softmax_scale(int d) { return 1.0 / std::sqrt(static_cast<double>(d)); }

// The CPU labs' scale: `where` names the function for the message ("lab3::attention_forward").
inline double softmax_scale(std::optional<double> scale, int d, const std::string& where) {
  if (!scale) return default_softmax_scale(d);
  if (!std::isfinite(*scale) || *scale <= 0.0)
    throw BadInput(where + ": scale must be finite and > 0, or not given for 1/sqrt(d); got " +
                   std::to_string(*scale));
  return *scale;
}

// The GPU labs' scale: 0 means 1/sqrt(d), rounded once to float.
inline float softmax_scale(float scale, int d, const std::string& where) {
  if (scale == 0.0f) return static_cast<float>(default_softmax_scale(d));
  if (!std::isfinite(scale) || scale < 0.0f)
    throw BadInput(where + ": scale must be finite and > 0, or 0 for 1/sqrt(d); got " +
                   std::to_string(scale));
  return scale;
}

}  // namespace course
