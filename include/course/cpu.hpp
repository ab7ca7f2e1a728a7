// Types and helpers shared by the CPU labs (1-3 and lab 7's part 1), their solutions and their graders.
//
// Storage and arithmetic are separate, as on a GPU: a tensor is *stored* as T (double, float,
// bf16 or fp16) and all arithmetic happens in Acc = accum_t<T> (double for double, float for
// everything else). Convert an element with `acc<Acc>(x)` when you read it and with
// `store<T>(a)` when you write it. Use course::exp / course::log / course::max on Acc values:
// they work for float, double and the grader's CountedFloat alike. course::kLog2e and
// course::kLn2 (course/math_constants.hpp) are log2(e) and ln 2, for the exp2 form.
#pragma once

#include <Eigen/Core>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "course/counted.hpp"
#include "course/errors.hpp"
#include "course/math_constants.hpp"

namespace course {

using bf16 = Eigen::bfloat16;
using fp16 = Eigen::half;

// A row-major matrix of storage type T: one head's Q, K, V or O is Matrix<T>(N, d).
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// The accumulation type for storage type T: fp32 for the 16-bit types, as GPUs do.
template <class T>
using accum_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, double>) return "fp64";
  else if constexpr (std::is_same_v<T, float>) return "fp32";
  else if constexpr (std::is_same_v<T, bf16>) return "bf16";
  else if constexpr (std::is_same_v<T, fp16>) return "fp16";
  else return "unknown";
}

// Read a stored element into the accumulation type, and round an accumulator for storage.
template <class Acc, class T>
Acc acc(T x) {
  return Acc(static_cast<accum_t<T>>(x));
}
template <class T, class Acc>
T store(Acc a) {
  return static_cast<T>(static_cast<accum_t<T>>(a));
}

// Math on accumulators. Overloads for float, double and CountedFloat; nothing else is needed.
inline float exp(float x) { return std::exp(x); }
inline double exp(double x) { return std::exp(x); }
inline CountedFloat exp(CountedFloat x) {
  ++CountedFloat::exponentials();
  return std::exp(x.value());
}
// 2^x, for FlashAttention-2's form exp(x) = exp2(x log2(e)) with log2(e) folded into the scale.
inline float exp2(float x) { return std::exp2(x); }
inline double exp2(double x) { return std::exp2(x); }
inline CountedFloat exp2(CountedFloat x) {
  ++CountedFloat::exponentials();
  return std::exp2(x.value());
}
inline float log(float x) { return std::log(x); }
inline double log(double x) { return std::log(x); }
inline CountedFloat log(CountedFloat x) { return std::log(x.value()); }
inline float log2(float x) { return std::log2(x); }
inline double log2(double x) { return std::log2(x); }
inline CountedFloat log2(CountedFloat x) { return std::log2(x.value()); }
template <class Acc>
Acc max(Acc a, Acc b) {
  return a < b ? b : a;
}
template <class Acc>
Acc neg_inf() {
  return Acc(-std::numeric_limits<float>::infinity());
}
template <class Acc>
bool is_neg_inf(Acc x) {
  return x == neg_inf<Acc>();
}

// Batched tensors, [B, H, N, d] row-major, as PyTorch and FlashAttention lay them out.
template <class T>
struct Tensor4 {
  int B = 0, H = 0, N = 0, d = 0;
  std::vector<T> data;

  Tensor4() = default;
  Tensor4(int b, int h, int n, int dim)
      : B(b), H(h), N(n), d(dim), data(std::size_t(b) * h * n * dim) {}

  // One head as an N x d matrix view (no copy).
  Eigen::Map<Matrix<T>> head(int b, int h) {
    return Eigen::Map<Matrix<T>>(data.data() + offset(b, h), N, d);
  }
  Eigen::Map<const Matrix<T>> head(int b, int h) const {
    return Eigen::Map<const Matrix<T>>(data.data() + offset(b, h), N, d);
  }
  std::size_t offset(int b, int h) const { return (std::size_t(b) * H + h) * N * d; }
};

namespace detail {
// Throws BadInput naming the first element that is NaN or infinite, unless it is -inf and
// -inf is allowed. `rule` ends the message.
template <class T>
void require_elements(const Eigen::Ref<const Matrix<T>>& x, const std::string& who,
                      bool allow_neg_inf, const char* rule) {
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index c = 0; c < x.cols(); ++c) {
      const double v = static_cast<double>(static_cast<accum_t<T>>(x(r, c)));
      if (std::isfinite(v) || (allow_neg_inf && v < 0 && !std::isnan(v))) continue;
      throw BadInput(who + ": element (" + std::to_string(r) + ", " + std::to_string(c) +
                     ") is " + (std::isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf") + "; " + rule);
    }
}
}  // namespace detail

// Throws BadInput unless every element is finite or -inf. -inf is a legal score (a masked
// key); NaN and +inf are not: they would silently poison a whole row.
template <class T>
void require_no_nan_or_pos_inf(const Eigen::Ref<const Matrix<T>>& x, const std::string& who) {
  detail::require_elements<T>(x, who, true, "scores must be finite or -inf (masked)");
}

// Throws BadInput unless every element is finite. For data such as Q, K and V, where even -inf
// has no meaning: one infinite entry turns a whole row of scores into NaN (inf - inf).
template <class T>
void require_finite(const Eigen::Ref<const Matrix<T>>& x, const std::string& who) {
  detail::require_elements<T>(x, who, false, "every element must be finite");
}

// Throws BadInput unless both block sizes are at least 1 and a scale, where one is given, is
// finite: the tile options of labs 3 and 7 (block_q, block_k, scale).
template <class TileOptions>
void require_tile_options(const TileOptions& options, const std::string& who) {
  if (options.block_q < 1 || options.block_k < 1)
    throw BadInput(who + ": block sizes must be at least 1; got block_q = " +
                   std::to_string(options.block_q) + ", block_k = " +
                   std::to_string(options.block_k));
  if (options.scale && !std::isfinite(*options.scale))
    throw BadInput(who + ": the scale must be finite; got " + std::to_string(*options.scale));
}

}  // namespace course
