// The reference's own tests: closed forms that need no other implementation, and agreement
// with the same code in long double. If these fail, no grade means anything.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "reference/data.hpp"
#include "reference/reference.hpp"

using reference::Mat;
using reference::Vec;
using Md = Mat<double>;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

Md normal(Eigen::Index r, Eigen::Index c, const char* label) {
  reference::Rng rng(7, label);
  return reference::random_matrix(r, c, reference::Distribution::normal, rng);
}
}  // namespace

TEST_CASE("softmax of a row of equal entries is uniform") {
  Md x = Md::Constant(2, 5, 3.25);
  const Md y = reference::softmax_rows(x);
  CHECK((y.array() - 0.2).abs().maxCoeff() < 1e-16);
  CHECK(std::abs(reference::logsumexp_rows(x)(0) - (3.25 + std::log(5.0))) < 1e-15);
}

TEST_CASE("logsumexp does not overflow at logits of 1e4 and handles -inf") {
  Md x(3, 3);
  x << 1e4, 1e4, -kInf,     //
      -1e4, -1e4 - 1, -1e4,  //
      -kInf, -kInf, -kInf;
  const Vec<double> lse = reference::logsumexp_rows(x);
  CHECK(lse(0) == doctest::Approx(1e4 + std::log(2.0)).epsilon(1e-15));
  CHECK(lse(1) == doctest::Approx(-1e4 + std::log(2.0 + std::exp(-1.0))).epsilon(1e-15));
  CHECK(lse(2) == -kInf);
  const Md y = reference::softmax_rows(x);
  CHECK(y.row(2).isZero());
  CHECK(y(0, 2) == 0.0);
}

TEST_CASE("attention with all keys equal returns the mean of V") {
  const Md Q = normal(4, 8, "q");
  const Md K = Md::Ones(6, 1) * normal(1, 8, "k");  // six copies of one key
  const Md V = normal(6, 8, "v");
  const auto a = reference::attention<double>(Q, K, V, 0.5, false);
  for (Eigen::Index i = 0; i < 4; ++i)
    CHECK((a.O.row(i) - V.colwise().mean()).cwiseAbs().maxCoeff() < 1e-14);
}

TEST_CASE("attention with one dominant key returns that key's value") {
  const Md Q = Md::Ones(3, 4);
  Md K = Md::Zero(5, 4);
  K.row(2).setConstant(100.0);  // score 400 * scale against 0 for the others
  const Md V = normal(5, 4, "v");
  const auto a = reference::attention<double>(Q, K, V, 1.0, false);
  for (Eigen::Index i = 0; i < 3; ++i) CHECK((a.O.row(i) - V.row(2)).cwiseAbs().maxCoeff() < 1e-15);
  CHECK(a.lse(0) == doctest::Approx(400.0));
}

TEST_CASE("attention with d = 1 matches a hand computation") {
  Md Q(1, 1), K(2, 1), V(2, 1);
  Q << 1.0;
  K << 0.0, std::log(3.0);  // weights 1 : 3
  V << 2.0, 6.0;
  const auto a = reference::attention<double>(Q, K, V, 1.0, false);
  CHECK(a.O(0, 0) == doctest::Approx((2.0 * 1 + 6.0 * 3) / 4));
  CHECK(a.lse(0) == doctest::Approx(std::log(4.0)));
}

TEST_CASE("causal mask is aligned bottom-right; rows with no key give O = 0 and LSE = -inf") {
  CHECK(reference::causal_sees(0, 0, 4, 4));
  CHECK_FALSE(reference::causal_sees(0, 1, 4, 4));
  CHECK(reference::causal_sees(0, 2, 2, 4));       // Nq < Nk: the first query sees Nk - Nq + 1 keys
  CHECK_FALSE(reference::causal_sees(0, 0, 5, 3));  // Nq > Nk: the first two queries see nothing
  CHECK_FALSE(reference::causal_sees(1, 0, 5, 3));
  CHECK(reference::causal_sees(2, 0, 5, 3));
  const auto a = reference::attention<double>(normal(5, 4, "q"), normal(3, 4, "k"),
                                              normal(3, 4, "v"), 0.5, true);
  CHECK(a.O.row(0).isZero());
  CHECK(a.O.row(1).isZero());
  CHECK(a.lse(0) == -kInf);
  CHECK(a.lse(1) == -kInf);
  CHECK(std::isfinite(a.lse(2)));
  CHECK_FALSE(a.O.hasNaN());
}

TEST_CASE("fp64 reference agrees with the same computation in long double") {
  for (bool causal : {false, true}) {
    const Md Q = normal(65, 16, "q"), K = normal(70, 16, "k"), V = normal(70, 16, "v");
    const auto a = reference::attention<double>(Q, K, V, 0.25, causal);
    const auto b = reference::attention<long double>(Q.cast<long double>(), K.cast<long double>(),
                                                     V.cast<long double>(), 0.25L, causal);
    CHECK((a.O - b.O.cast<double>()).cwiseAbs().maxCoeff() < 1e-14);
    CHECK((a.lse - b.lse.cast<double>()).cwiseAbs().maxCoeff() < 1e-14);
  }
}

TEST_CASE("plain low-precision attention is close to, but not equal to, the fp64 one") {
  const Md Q = normal(32, 16, "q"), K = normal(40, 16, "k"), V = normal(40, 16, "v");
  const auto exact = reference::attention<double>(Q, K, V, 0.25, false);
  const auto bf = reference::plain_attention<Eigen::bfloat16>(Q, K, V, 0.25, false);
  const double err = (bf.O - exact.O).cwiseAbs().maxCoeff();
  CHECK(err > 1e-4);  // it really rounds to bf16
  CHECK(err < 5e-2);
  const auto f64 = reference::plain_attention<double>(Q, K, V, 0.25, false);
  CHECK((f64.O - exact.O).cwiseAbs().maxCoeff() < 1e-15);
}

TEST_CASE("data generator: same seed and label give the same numbers on every run") {
  reference::Rng a(42, "x"), b(42, "x"), c(42, "y"), d(43, "x");
  const std::uint64_t first = a.next_u64();
  CHECK(first == b.next_u64());
  CHECK(first != c.next_u64());
  CHECK(first != d.next_u64());
  reference::Rng r(1, "dist");
  const Md big = reference::random_matrix(200, 200, reference::Distribution::normal, r);
  CHECK(std::abs(big.mean()) < 0.02);
  CHECK(std::abs(std::sqrt((big.array() - big.mean()).square().mean()) - 1.0) < 0.02);
  const Md masked = reference::random_matrix(4, 50, reference::Distribution::masked, r);
  CHECK((masked.row(0).array() == -kInf).all());
  const Md large = reference::random_matrix(4, 50, reference::Distribution::large_logits, r);
  CHECK(large.cwiseAbs().maxCoeff() > 1e3);
}

TEST_CASE("fp64 softmax is accurate to a few ulps against long double at logits of 1e4") {
  // exp(x - lse) would err by ~ulp(lse) = 3.6e-12 here; exp(x - m) / l errs by ~1e-16.
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    reference::Rng rng(seed, "softmax/long-double");
    const Md x = reference::random_matrix(4, 1000, reference::Distribution::large_logits, rng);
    const Md y = reference::softmax_rows<double>(x);
    const Md y_ld = reference::softmax_rows<long double>(x.cast<long double>()).cast<double>();
    CHECK((y - y_ld).cwiseAbs().maxCoeff() < 4e-16);
    CHECK((reference::logsumexp_rows<double>(x) -
           reference::logsumexp_rows<long double>(x.cast<long double>()).cast<double>())
              .cwiseAbs()
              .maxCoeff() <= 4e-12);  // half an ulp of |lse| ~ 3e4, plus one for log
  }
}

TEST_CASE("data generator: attention inputs with shifted rows and large scores") {
  reference::Rng rng(3, "attention-inputs");
  const auto in = reference::attention_inputs(6, 9, 16, reference::Distribution::negative_rows, rng);
  const Md S = reference::scores<double>(in.Q, in.K, 0.25, false);
  CHECK(S.row(1).maxCoeff() < -900);  // every score of an odd row is far below 0
  CHECK(S.row(0).maxCoeff() > -50);   // even rows are ordinary
  const auto shifted = reference::attention<double>(in.Q, in.K, in.V, 0.25, false);
  Md Q0 = in.Q;
  Q0.col(0).setZero();  // removing the constant shift leaves softmax unchanged
  const auto plain = reference::attention<double>(Q0, in.K, in.V, 0.25, false);
  CHECK((shifted.O - plain.O).cwiseAbs().maxCoeff() < 1e-12);
  reference::Rng rng2(3, "large-scores");
  const auto big = reference::attention_inputs(64, 64, 16, reference::Distribution::large_scores, rng2);
  const Md S2 = reference::scores<double>(big.Q, big.K, 0.25, false);
  CHECK(S2.cwiseAbs().maxCoeff() > 89);  // beyond fp32's exp overflow
}

// --- The backward pass ---------------------------------------------------------------------------

namespace {
using Mld = Mat<long double>;

// L = sum(dO o O) for O = attention(Q, K, V): its gradients are what attention_backward returns.
long double loss(const Mld& Q, const Mld& K, const Mld& V, const Mld& dO, long double scale,
                 bool causal) {
  return reference::attention<long double>(Q, K, V, scale, causal).O.cwiseProduct(dO).sum();
}

// The central difference (L(x + h) - L(x - h)) / 2h for every element of one of Q, K, V (which
// = 0, 1, 2), in long double: truncation error ~h^2 = 1e-10, rounding ~1e-19 / h = 1e-14.
Md finite_difference(int which, const Md& Q, const Md& K, const Md& V, const Md& dO, double scale,
                     bool causal) {
  const long double h = 1e-5L;
  Mld x[3] = {Q.cast<long double>(), K.cast<long double>(), V.cast<long double>()};
  const Mld dout = dO.cast<long double>();
  Md grad(x[which].rows(), x[which].cols());
  for (Eigen::Index r = 0; r < grad.rows(); ++r)
    for (Eigen::Index c = 0; c < grad.cols(); ++c) {
      const long double keep = x[which](r, c);
      x[which](r, c) = keep + h;
      const long double up = loss(x[0], x[1], x[2], dout, scale, causal);
      x[which](r, c) = keep - h;
      const long double down = loss(x[0], x[1], x[2], dout, scale, causal);
      x[which](r, c) = keep;
      grad(r, c) = double((up - down) / (2 * h));
    }
  return grad;
}

double relative_difference(const Md& a, const Md& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(1e-300, b.cwiseAbs().maxCoeff());
}
}  // namespace

TEST_CASE("attention_backward matches finite differences of L = sum(dO o O)") {
  // Nq < Nk, Nq > Nk (causal: the first two queries see no key), causal and not. Measured
  // agreement ~1e-10, the central difference's own truncation error.
  for (auto [Nq, Nk] : {std::pair{3, 5}, std::pair{5, 3}})
    for (bool causal : {false, true}) {
      CAPTURE(Nq);
      CAPTURE(Nk);
      CAPTURE(causal);
      const Md Q = normal(Nq, 4, "q"), K = normal(Nk, 4, "k"), V = normal(Nk, 4, "v"),
               dO = normal(Nq, 4, "do");
      const auto g = reference::attention_backward<double>(Q, K, V, dO, 0.7, causal);
      CHECK(relative_difference(g.dQ, finite_difference(0, Q, K, V, dO, 0.7, causal)) < 1e-8);
      CHECK(relative_difference(g.dK, finite_difference(1, Q, K, V, dO, 0.7, causal)) < 1e-8);
      CHECK(relative_difference(g.dV, finite_difference(2, Q, K, V, dO, 0.7, causal)) < 1e-8);
      if (causal && Nq > Nk) CHECK(g.dQ.topRows(Nq - Nk).isZero());  // rows with no key
    }
}

TEST_CASE("attention_backward with one key: dV is the column sum of dO, dQ and dK are 0") {
  // A single key gets probability 1 in every row whatever the scores: O = V, nothing depends
  // on Q or K.
  const Md Q = normal(6, 3, "q"), K = normal(1, 3, "k"), V = normal(1, 3, "v"),
           dO = normal(6, 3, "do");
  const auto g = reference::attention_backward<double>(Q, K, V, dO, 0.5, false);
  CHECK(g.dQ.cwiseAbs().maxCoeff() < 1e-15);
  CHECK(g.dK.cwiseAbs().maxCoeff() < 1e-15);
  CHECK((g.dV - dO.colwise().sum()).cwiseAbs().maxCoeff() < 1e-15);
}

TEST_CASE("fp64 backward agrees with the same computation in long double") {
  for (bool causal : {false, true}) {
    const Md Q = normal(65, 16, "q"), K = normal(70, 16, "k"), V = normal(70, 16, "v"),
             dO = normal(65, 16, "do");
    const auto a = reference::attention_backward<double>(Q, K, V, dO, 0.25, causal);
    const auto b = reference::attention_backward<long double>(
        Q.cast<long double>(), K.cast<long double>(), V.cast<long double>(),
        dO.cast<long double>(), 0.25L, causal);
    CHECK(relative_difference(a.dQ, b.dQ.cast<double>()) < 1e-14);
    CHECK(relative_difference(a.dK, b.dK.cast<double>()) < 1e-14);
    CHECK(relative_difference(a.dV, b.dV.cast<double>()) < 1e-14);
  }
}

TEST_CASE("the backward from the saved O and LSE (FA2's formulas) equals the definition in fp64") {
  // D = rowsum(dO o O) and P = exp(S - LSE) are the definitions' sum_k P dP and softmax(S),
  // rewritten: with the true O and LSE the plain fp64 backward is the reference, to rounding.
  // Nq > Nk and causal: rows that see no key (LSE = -inf) must give 0, not NaN.
  for (auto [Nq, Nk] : {std::pair{40, 57}, std::pair{57, 40}})
    for (bool causal : {false, true}) {
      const Md Q = normal(Nq, 8, "q"), K = normal(Nk, 8, "k"), V = normal(Nk, 8, "v"),
               dO = normal(Nq, 8, "do");
      const auto fwd = reference::attention<double>(Q, K, V, 0.35, causal);
      const auto ref = reference::attention_backward<double>(Q, K, V, dO, 0.35, causal);
      const auto saved =
          reference::plain_attention_backward<double>(Q, K, V, fwd.O, dO, fwd.lse, 0.35, causal);
      CHECK_FALSE(saved.dQ.hasNaN());
      CHECK_FALSE(saved.dK.hasNaN());
      CHECK(relative_difference(saved.dQ, ref.dQ) < 1e-13);
      CHECK(relative_difference(saved.dK, ref.dK) < 1e-13);
      CHECK(relative_difference(saved.dV, ref.dV) < 1e-13);
    }
}

TEST_CASE("plain low-precision backward is close to, but not equal to, the fp64 one") {
  const Md Q = normal(32, 16, "q"), K = normal(40, 16, "k"), V = normal(40, 16, "v"),
           dO = normal(32, 16, "do");
  const auto fwd = reference::attention<double>(Q, K, V, 0.25, false);
  const auto exact = reference::attention_backward<double>(Q, K, V, dO, 0.25, false);
  const auto bf = reference::plain_attention_backward<Eigen::bfloat16>(
      Q, K, V, reference::round_to<Eigen::bfloat16>(fwd.O), dO, fwd.lse, 0.25, false);
  const double err = relative_difference(bf.dK, exact.dK);
  CHECK(err > 1e-4);  // it really rounds to bf16
  CHECK(err < 5e-2);
  const auto f32 =
      reference::plain_attention_backward<float>(Q, K, V, fwd.O, dO, fwd.lse, 0.25, false);
  CHECK(relative_difference(f32.dK, exact.dK) < 1e-5);
}

TEST_CASE("gather_pages makes a paged cache contiguous again, through the block table") {
  // A pool of 5 pages of 4 rows for 2 KV heads, d = 3; element (page, head, row, c) holds
  // 1000 page + 100 head + 10 row + c, so a gathered row says where it came from.
  const int pages = 5, heads = 2, page_size = 4, d = 3;
  std::vector<double> pool(std::size_t(pages) * heads * page_size * d);
  for (int p = 0; p < pages; ++p)
    for (int h = 0; h < heads; ++h)
      for (int r = 0; r < page_size; ++r)
        for (int c = 0; c < d; ++c)
          pool[((std::size_t(p) * heads + h) * page_size + r) * d + c] = 1000.0 * p + 100 * h + 10 * r + c;
  const int block_row[3] = {3, 0, 4};  // keys 0-3 in page 3, 4-7 in page 0, 8-9 in page 4
  const Md rows = reference::gather_pages(pool.data(), pages, heads, page_size, d, block_row, 10, 1);
  REQUIRE(rows.rows() == 10);
  CHECK(rows(0, 0) == 3100.0);
  CHECK(rows(3, 2) == 3132.0);
  CHECK(rows(4, 0) == 100.0);
  CHECK(rows(9, 1) == 4111.0);
  const int bad_row[1] = {5};
  CHECK_THROWS_AS(reference::gather_pages(pool.data(), pages, heads, page_size, d, bad_row, 2, 0), std::out_of_range);
}
