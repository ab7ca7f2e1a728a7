#include "reference/data.hpp"

#include <cmath>
#include <limits>
#include <numbers>

namespace reference {

namespace {
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// FNV-1a, so that a label gives the same stream everywhere.
std::uint64_t hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}
}  // namespace

Rng::Rng(std::uint64_t seed, std::string_view label) : state_(mix(seed) ^ hash(label)) {}

std::uint64_t Rng::next_u64() { return mix(state_ += 0x9e3779b97f4a7c15ULL); }

double Rng::uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // in (0, 1], so log is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

int Rng::uniform_int(int lo, int hi) {
  return lo + int(next_u64() % std::uint64_t(hi - lo + 1));
}

const char* to_string(Distribution d) {
  switch (d) {
    case Distribution::normal: return "normal";
    case Distribution::large_logits: return "large_logits";
    case Distribution::outliers: return "outliers";
    case Distribution::masked: return "masked";
    case Distribution::offset_logits: return "offset_logits";
    case Distribution::large_scores: return "large_scores";
    case Distribution::negative_rows: return "negative_rows";
    case Distribution::increasing_scores: return "increasing_scores";
  }
  return "?";
}

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, Distribution dist, Rng& rng) {
  Eigen::MatrixXd x(rows, cols);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (Eigen::Index r = 0; r < rows; ++r)
    for (Eigen::Index c = 0; c < cols; ++c) {
      double v = rng.normal();
      switch (dist) {
        case Distribution::normal: break;
        case Distribution::large_logits: v *= 1e4; break;
        case Distribution::outliers:
          if (rng.uniform() < 0.01) v = rng.uniform() < 0.5 ? 30.0 : -30.0;
          break;
        case Distribution::masked:
          if (r == 0 || rng.uniform() < 0.3) v = neg_inf;
          break;
        case Distribution::offset_logits: v = 2.0 * v + (r % 2 ? -1e4 : 1e4); break;
        case Distribution::large_scores: v *= 6.0; break;
        case Distribution::negative_rows:
        case Distribution::increasing_scores: break;  // shaped by attention_inputs
      }
      x(r, c) = v;
    }
  return x;
}

AttentionInputs attention_inputs(Eigen::Index Nq, Eigen::Index Nk, Eigen::Index d,
                                 Distribution dist, Rng& rng) {
  AttentionInputs in;
  in.Q = random_matrix(Nq, d, dist, rng);
  in.K = random_matrix(Nk, d, dist, rng);
  in.V = random_matrix(Nk, d, Distribution::normal, rng);
  if (dist == Distribution::negative_rows) {
    // Score of query i and key j = scale * (Q(i, 0) K(j, 0) + rest): with K(j, 0) = 1 and
    // Q(i, 0) = -1000 sqrt(d), the default scale 1/sqrt(d) shifts row i by exactly -1000.
    in.K.col(0).setOnes();
    for (Eigen::Index i = 1; i < Nq; i += 2) in.Q(i, 0) = -1000.0 * std::sqrt(double(d));
  }
  if (dist == Distribution::increasing_scores) {
    // Score (i, j) = scale * (sqrt(d) * j / 2 + rest) = j / 2 + N(0, (d - 1) / d) at scale 1/sqrt(d).
    for (Eigen::Index j = 0; j < Nk; ++j) in.K(j, 0) = 0.5 * double(j);
    in.Q.col(0).setConstant(std::sqrt(double(d)));
  }
  return in;
}

}  // namespace reference
