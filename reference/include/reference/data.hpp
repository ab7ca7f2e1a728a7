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
};

const char* to_string(Distribution d);

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, Distribution dist, Rng& rng);

}  // namespace reference
