#include "reference/reference.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

namespace reference {

namespace {
template <class R>
constexpr R neg_inf() {
  return -std::numeric_limits<R>::infinity();
}
}  // namespace

template <class R>
Vec<R> logsumexp_rows(const Mat<R>& x) {
  Vec<R> lse(x.rows());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    R m = neg_inf<R>();
    for (Eigen::Index c = 0; c < x.cols(); ++c) m = std::max(m, x(r, c));
    if (m == neg_inf<R>()) {  // no finite entry: the empty sum
      lse(r) = neg_inf<R>();
      continue;
    }
    R sum = 0;
    for (Eigen::Index c = 0; c < x.cols(); ++c) sum += std::exp(x(r, c) - m);
    lse(r) = m + std::log(sum);
  }
  return lse;
}

template <class R>
Mat<R> softmax_rows(const Mat<R>& x) {
  const Vec<R> lse = logsumexp_rows(x);
  Mat<R> y = Mat<R>::Zero(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    if (lse(r) == neg_inf<R>()) continue;
    for (Eigen::Index c = 0; c < x.cols(); ++c) y(r, c) = std::exp(x(r, c) - lse(r));
  }
  return y;
}

template <class R>
Mat<R> scores(const Mat<R>& Q, const Mat<R>& K, R scale, bool causal) {
  Mat<R> S = scale * (Q * K.transpose());
  if (causal)
    for (Eigen::Index i = 0; i < S.rows(); ++i)
      for (Eigen::Index j = 0; j < S.cols(); ++j)
        if (!causal_sees(i, j, S.rows(), S.cols())) S(i, j) = neg_inf<R>();
  return S;
}

template <class R>
Attention<R> attention(const Mat<R>& Q, const Mat<R>& K, const Mat<R>& V, R scale, bool causal) {
  const Mat<R> S = scores(Q, K, scale, causal);
  return {softmax_rows(S) * V, logsumexp_rows(S)};
}

template <class T>
Mat<double> round_to(const Mat<double>& x) {
  if constexpr (std::is_same_v<T, double>) {
    return x;
  } else {
    return x.template cast<T>().template cast<double>();
  }
}

template <class T>
Mat<double> plain_softmax_rows(const Mat<double>& x) {
  // Like torch.softmax on a T tensor: fp32 (or fp64) inside, one rounding of the output.
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Mat<Acc> y = softmax_rows<Acc>(x.template cast<Acc>());
  return round_to<T>(y.template cast<double>());
}

template <class T>
Vec<double> plain_logsumexp_rows(const Mat<double>& x) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  return logsumexp_rows<Acc>(x.template cast<Acc>()).template cast<double>();
}

template <class T>
Attention<double> plain_attention(const Mat<double>& Q, const Mat<double>& K, const Mat<double>& V,
                                  double scale, bool causal) {
  // The unfused math path: S, P and O each rounded to T, products accumulated in Acc.
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Mat<Acc> S = round_to<T>(scores<Acc>(Q.template cast<Acc>(), K.template cast<Acc>(),
                                             Acc(scale), causal)
                                     .template cast<double>())
                         .template cast<Acc>();
  const Mat<Acc> P = round_to<T>(softmax_rows<Acc>(S).template cast<double>()).template cast<Acc>();
  const Mat<Acc> O = P * V.template cast<Acc>();
  return {round_to<T>(O.template cast<double>()), logsumexp_rows<Acc>(S).template cast<double>()};
}

#define REFERENCE_INSTANTIATE_REAL(R)                                              \
  template Vec<R> logsumexp_rows<R>(const Mat<R>&);                                \
  template Mat<R> softmax_rows<R>(const Mat<R>&);                                  \
  template Mat<R> scores<R>(const Mat<R>&, const Mat<R>&, R, bool);                \
  template Attention<R> attention<R>(const Mat<R>&, const Mat<R>&, const Mat<R>&, R, bool);
REFERENCE_INSTANTIATE_REAL(float)
REFERENCE_INSTANTIATE_REAL(double)
REFERENCE_INSTANTIATE_REAL(long double)

#define REFERENCE_INSTANTIATE_STORAGE(T)                                                   \
  template Mat<double> round_to<T>(const Mat<double>&);                                    \
  template Mat<double> plain_softmax_rows<T>(const Mat<double>&);                          \
  template Vec<double> plain_logsumexp_rows<T>(const Mat<double>&);                        \
  template Attention<double> plain_attention<T>(const Mat<double>&, const Mat<double>&,    \
                                                const Mat<double>&, double, bool);
REFERENCE_INSTANTIATE_STORAGE(double)
REFERENCE_INSTANTIATE_STORAGE(float)
REFERENCE_INSTANTIATE_STORAGE(Eigen::bfloat16)
REFERENCE_INSTANTIATE_STORAGE(Eigen::half)

}  // namespace reference
