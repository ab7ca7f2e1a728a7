// Lab 1, correct variant "online_normaliser": the row max and the sum of exponentials in ONE
// pass (Milakov and Gimelshein, 2018, "Online normalizer calculation for softmax"; FA1
// Algorithm 1 line 11 applied to one key at a time). Whenever the running max grows, the sum so
// far is rescaled by exp(m_old - m_new). Same result as two passes, up to rounding.
//
// Storage is T, arithmetic is Acc = accum_t<T> (fp32 for bf16/fp16): read each element with
// acc<Acc>(x), round once with store<T>(a) when writing. Lecture: lectures/01-safe-softmax.md.
#include "course/lab1_softmax.hpp"

namespace course::lab1 {

namespace {

// The largest entry of row r, or -inf for an empty or fully masked row.
template <class Acc>
struct RowStats {
  Acc m, l;
};

// One pass over row r: running max m and l = sum_j exp(x_j - m), rescaled as m grows.
template <class T, class Acc = accum_t<T>>
RowStats<Acc> online_stats(const Matrix<T>& x, Eigen::Index r) {
  Acc m = neg_inf<Acc>(), l = 0;
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    const Acc v = acc<Acc>(x(r, c));
    if (is_neg_inf(v)) continue;  // a masked entry adds exp(-inf) = 0
    if (v > m) {
      l = l * course::exp(m - v) + Acc(1);  // exp(-inf) = 0 for the first entry
      m = v;
    } else {
      l += course::exp(v - m);
    }
  }
  return {m, l};
}

}  // namespace

template <class T>
Matrix<T> softmax_rows(const Matrix<T>& x) {
  require_no_nan_or_pos_inf<T>(x, "softmax_rows");
  Matrix<T> y(x.rows(), x.cols());
  using Acc = accum_t<T>;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const auto [m, l] = online_stats(x, r);
    if (is_neg_inf(m)) {
      y.row(r).setConstant(T(0));
      continue;
    }
    for (Eigen::Index c = 0; c < x.cols(); ++c)
      y(r, c) = store<T>(course::exp(acc<Acc>(x(r, c)) - m) / l);
  }
  return y;
}

template <class T>
Vector<accum_t<T>> logsumexp_rows(const Matrix<T>& x) {
  require_no_nan_or_pos_inf<T>(x, "logsumexp_rows");
  Vector<accum_t<T>> lse(x.rows());
  using Acc = accum_t<T>;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const auto [m, l] = online_stats(x, r);
    lse(r) = is_neg_inf(m) ? m : m + course::log(l);
  }
  return lse;
}

// The four storage types every lab supports.
template Matrix<double> softmax_rows<double>(const Matrix<double>&);
template Matrix<float> softmax_rows<float>(const Matrix<float>&);
template Matrix<bf16> softmax_rows<bf16>(const Matrix<bf16>&);
template Matrix<fp16> softmax_rows<fp16>(const Matrix<fp16>&);
template Vector<double> logsumexp_rows<double>(const Matrix<double>&);
template Vector<float> logsumexp_rows<float>(const Matrix<float>&);
template Vector<float> logsumexp_rows<bf16>(const Matrix<bf16>&);
template Vector<float> logsumexp_rows<fp16>(const Matrix<fp16>&);

}  // namespace course::lab1
