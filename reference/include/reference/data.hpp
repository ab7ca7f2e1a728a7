// Seeded input generators, shared by every grader, test, report and benchmark.
//
// One generator, so that every figure in the course is reproducible from a printed seed. It
// does not use std::normal_distribution (whose output differs between standard libraries):
// a seed gives the same numbers on every machine.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <string_view>

namespace reference {

// splitmix64 stream, seeded from (seed, label): each check draws from its own stream, so adding a
// check never changes the inputs of another.
class Rng {
 public:
  Rng(std::uint64_t seed, std::string_view label);
  std::uint64_t next_u64();
  double uniform();        // in [0, 1)
  double normal();         // standard normal (Box-Muller)
  int uniform_int(int lo, int hi);  // in [lo, hi]

 private:
  std::uint64_t state_;
};

// How the entries of a generated matrix are distributed.
enum class Distribution {
  normal,        // N(0, 1)
  large_logits,  // N(0, 1) * 1e4: exp overflows in every dtype without the max shift
  outliers,      // N(0, 1) with ~1% of entries at +-30: one key dominates its row
  masked,        // N(0, 1) with ~30% of entries -inf and the first row fully -inf
  offset_logits, // N(0, 2) + 1e4 in even rows, - 1e4 in odd rows: ordinary spread far from 0.
                 // Without the max shift exp overflows (even rows) or underflows to 0/0 (odd
                 // rows, also when the running max starts at 0); exp(x - lse) loses the ulp of
                 // lse (2^-10 in fp32) in every probability
  // Attention inputs (draw them with attention_inputs; random_matrix gives Q's distribution):
  large_scores,  // Q and K are N(0, 1) * 6: with scale 1/sqrt(d) the scores have standard
                 // deviation 36 and reach +-150; exp overflows fp32 without the max shift,
                 // and the running max jumps often within a row
  negative_rows, // K's column 0 is 1 and, in every other query row (odd rows), Q's column 0 is
                 // -1000 sqrt(d): that row's scores at the default scale are the normal ones
                 // shifted by -1000. Softmax ignores the shift, but exp(score) underflows to 0
                 // in fp32 and fp64: a running max started at 0 instead of -inf gives 0/0 = NaN.
                 // -1000 sqrt(d) = -250 * 2^k is exact in bf16 and fp16 when d is a power of 4;
                 // for other d the shift is about -1000.
  increasing_scores, // K's column 0 is j / 2 for key j and Q's column 0 is sqrt(d): at the
                 // default scale every row's scores climb by 1/2 per key (plus N(0, 1) noise),
                 // so the running max grows in every key tile of 8 or more and each tile must
                 // rescale the row's statistics
};

const char* to_string(Distribution d);

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, Distribution dist, Rng& rng);

// Q [Nq, d], K and V [Nk, d] of one attention head, Q and K drawn from dist, V always N(0, 1).
// For normal, large_logits, outliers, masked and large_scores, Q and K are random_matrix draws
// (Q first, then K, then V, from the same stream); negative_rows shapes Q and K together.
struct AttentionInputs {
  Eigen::MatrixXd Q, K, V;
};
AttentionInputs attention_inputs(Eigen::Index Nq, Eigen::Index Nk, Eigen::Index d,
                                 Distribution dist, Rng& rng);

}  // namespace reference
