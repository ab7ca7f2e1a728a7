#include "reference/reference.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace reference {

namespace {
template <class R>
constexpr R neg_inf() {
  return -std::numeric_limits<R>::infinity();
}

// Every row's max m, its exponentials e = exp(x[r, :] - m) and their sum l, summed left to right
// (a row with no finite entry: m = -inf, e = 0, l = 0). Loops run column by column because the
// matrices are column-major: at N = 4096 a row-by-row walk misses the cache on every element
// and costs seconds.
template <class R>
struct RowExps {
  Vec<R> m;
  Mat<R> e;
  Vec<R> l;
};

template <class R>
RowExps<R> row_exps(const Mat<R>& x) {
  RowExps<R> s{Vec<R>::Constant(x.rows(), neg_inf<R>()), Mat<R>::Zero(x.rows(), x.cols()),
               Vec<R>::Zero(x.rows())};
  for (Eigen::Index c = 0; c < x.cols(); ++c)
    for (Eigen::Index r = 0; r < x.rows(); ++r) s.m(r) = std::max(s.m(r), x(r, c));
  for (Eigen::Index c = 0; c < x.cols(); ++c)
    for (Eigen::Index r = 0; r < x.rows(); ++r)
      if (s.m(r) != neg_inf<R>()) {
        s.e(r, c) = std::exp(x(r, c) - s.m(r));
        s.l(r) += s.e(r, c);
      }
  return s;
}

// log sum_j exp(x[r, j]) = m + log l; the empty sum of a row with no finite entry gives -inf.
template <class R>
Vec<R> lse_of(const RowExps<R>& s) {
  Vec<R> lse(s.m.size());
  for (Eigen::Index r = 0; r < s.m.size(); ++r)
    lse(r) = s.m(r) == neg_inf<R>() ? neg_inf<R>() : s.m(r) + std::log(s.l(r));
  return lse;
}

// exp(x - m) / l, not exp(x - lse): with logits of 1e4 the LSE is ~3e4, whose ulp in fp64
// (3.6e-12) would become the absolute error of every probability near 1. x - m is exact for
// the entries that matter (Sterbenz), so each probability errs by a few ulps, relative.
template <class R>
Mat<R> softmax_of(RowExps<R> s) {
  for (Eigen::Index c = 0; c < s.e.cols(); ++c)
    for (Eigen::Index r = 0; r < s.e.rows(); ++r)
      if (s.m(r) != neg_inf<R>()) s.e(r, c) /= s.l(r);
  return std::move(s.e);
}

// The softmax of every row and its LSE, from one computation of the exponentials.
template <class R>
std::pair<Mat<R>, Vec<R>> softmax_and_lse_rows(const Mat<R>& x) {
  RowExps<R> s = row_exps(x);
  Vec<R> lse = lse_of(s);
  return {softmax_of(std::move(s)), std::move(lse)};
}
}  // namespace

template <class R>
Vec<R> logsumexp_rows(const Mat<R>& x) {
  return lse_of(row_exps(x));
}

template <class R>
Mat<R> softmax_rows(const Mat<R>& x) {
  return softmax_of(row_exps(x));
}

template <class R>
Mat<R> scores(const Mat<R>& Q, const Mat<R>& K, R scale, bool causal) {
  Mat<R> S = scale * (Q * K.transpose());
  if (causal)  // column by column, as in row_exps
    for (Eigen::Index j = 0; j < S.cols(); ++j)
      for (Eigen::Index i = 0; i < S.rows(); ++i)
        if (!causal_sees(i, j, S.rows(), S.cols())) S(i, j) = neg_inf<R>();
  return S;
}

template <class R>
Attention<R> attention(const Mat<R>& Q, const Mat<R>& K, const Mat<R>& V, R scale, bool causal) {
  const auto [P, lse] = softmax_and_lse_rows(scores(Q, K, scale, causal));
  return {P * V, lse};
}

template <class R>
AttentionGradients<R> attention_backward(const Mat<R>& Q, const Mat<R>& K, const Mat<R>& V,
                                         const Mat<R>& dO, R scale, bool causal) {
  const Mat<R> P = softmax_rows(scores(Q, K, scale, causal));  // a row with no key is all 0
  const Mat<R> dP = dO * V.transpose();
  // The softmax's Jacobian applied to each row: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik).
  const Vec<R> row_dot = P.cwiseProduct(dP).rowwise().sum();
  const Mat<R> dS = P.cwiseProduct(dP - row_dot.replicate(1, dP.cols()));
  return {scale * (dS * K), scale * (dS.transpose() * Q), P.transpose() * dO};
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

// x rounded to T and held in Acc. Where T is Acc itself (fp32, fp64) there is nothing to round,
// and at N = 4096 the casts to double and back would cost more than the attention's products.
template <class T, class Acc>
Mat<Acc> rounded_to(Mat<Acc> x) {
  if constexpr (std::is_same_v<T, Acc>) {
    return x;
  } else {
    return x.template cast<T>().template cast<Acc>();
  }
}

template <class T>
Attention<double> plain_attention(const Mat<double>& Q, const Mat<double>& K, const Mat<double>& V,
                                  double scale, bool causal) {
  // The unfused math path: S, P and O each rounded to T, products accumulated in Acc.
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Mat<Acc> S = rounded_to<T>(
      scores<Acc>(Q.template cast<Acc>(), K.template cast<Acc>(), Acc(scale), causal));
  auto [P, lse] = softmax_and_lse_rows<Acc>(S);
  P = rounded_to<T>(std::move(P));
  const Mat<Acc> O = P * V.template cast<Acc>();
  return {rounded_to<T>(O).template cast<double>(), lse.template cast<double>()};
}

template <class T>
AttentionGradients<double> plain_attention_backward(const Mat<double>& Q, const Mat<double>& K,
                                                    const Mat<double>& V, const Mat<double>& O,
                                                    const Mat<double>& dO, const Vec<double>& lse,
                                                    double scale, bool causal) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  // Each intermediate computed in Acc from the rounded values before it, then rounded to T.
  auto rounded = [](const Mat<Acc>& x) -> Mat<Acc> {
    return round_to<T>(x.template cast<double>()).template cast<Acc>();
  };
  const Mat<Acc> q = Q.template cast<Acc>(), k = K.template cast<Acc>(),
                 v = V.template cast<Acc>(), o = O.template cast<Acc>(),
                 dout = dO.template cast<Acc>();
  const Mat<Acc> S = rounded(scores<Acc>(q, k, Acc(scale), causal));
  Mat<Acc> P = Mat<Acc>::Zero(S.rows(), S.cols());
  for (Eigen::Index c = 0; c < S.cols(); ++c)
    for (Eigen::Index r = 0; r < S.rows(); ++r)
      if (lse(r) != neg_inf<double>()) P(r, c) = std::exp(S(r, c) - Acc(lse(r)));
  P = rounded(P);
  const Mat<Acc> dP = rounded(dout * v.transpose());
  const Mat<Acc> D = rounded(dout.cwiseProduct(o).rowwise().sum());
  const Mat<Acc> dS = rounded(P.cwiseProduct(dP - D.replicate(1, dP.cols())));
  auto out = [](const Mat<Acc>& x) -> Mat<double> {
    return round_to<T>(x.template cast<double>());
  };
  return {out(Acc(scale) * (dS * k)), out(Acc(scale) * (dS.transpose() * q)),
          out(P.transpose() * dout)};
}

#define REFERENCE_INSTANTIATE_REAL(R)                                              \
  template Vec<R> logsumexp_rows<R>(const Mat<R>&);                                \
  template Mat<R> softmax_rows<R>(const Mat<R>&);                                  \
  template Mat<R> scores<R>(const Mat<R>&, const Mat<R>&, R, bool);                \
  template Attention<R> attention<R>(const Mat<R>&, const Mat<R>&, const Mat<R>&, R, bool);  \
  template AttentionGradients<R> attention_backward<R>(const Mat<R>&, const Mat<R>&,       \
                                                       const Mat<R>&, const Mat<R>&, R, bool);
REFERENCE_INSTANTIATE_REAL(float)
REFERENCE_INSTANTIATE_REAL(double)
REFERENCE_INSTANTIATE_REAL(long double)

#define REFERENCE_INSTANTIATE_STORAGE(T)                                                   \
  template Mat<double> round_to<T>(const Mat<double>&);                                    \
  template Mat<double> plain_softmax_rows<T>(const Mat<double>&);                          \
  template Vec<double> plain_logsumexp_rows<T>(const Mat<double>&);                        \
  template Attention<double> plain_attention<T>(const Mat<double>&, const Mat<double>&,    \
                                                const Mat<double>&, double, bool);        \
  template AttentionGradients<double> plain_attention_backward<T>(                         \
      const Mat<double>&, const Mat<double>&, const Mat<double>&, const Mat<double>&,      \
      const Mat<double>&, const Vec<double>&, double, bool);
REFERENCE_INSTANTIATE_STORAGE(double)
REFERENCE_INSTANTIATE_STORAGE(float)
REFERENCE_INSTANTIATE_STORAGE(Eigen::bfloat16)
REFERENCE_INSTANTIATE_STORAGE(Eigen::half)

Mat<double> gather_pages(const double* pool, int num_pages, int kv_heads, int page_size, int d,
                         const int* block_row, int len, int kv_head) {
  Mat<double> rows(len, d);
  for (int j = 0; j < len; ++j) {
    const int page = block_row[j / page_size];
    if (page < 0 || page >= num_pages) throw std::out_of_range("gather_pages: page index outside the pool");
    const double* src = pool + ((std::size_t(page) * kv_heads + kv_head) * page_size + j % page_size) * d;
    for (int c = 0; c < d; ++c) rows(j, c) = src[c];
  }
  return rows;
}

}  // namespace reference
