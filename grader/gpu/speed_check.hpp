// The check of what a speed check timed (SpeedCheck in speed_rules.hpp), on the grader's side:
// the timed inputs drawn again on the CPU and the fp64 reference of the rows the lab process sent
// back. Plain C++ (Eigen, the reference), so that a CPU test can hold it to the full reference.
#pragma once

#include <string>
#include <vector>

#include <Eigen/Core>

#include "speed_rules.hpp"

namespace gpu_grading {

// Rows [first, first + rows) of head `head` (b * H + h) of a [B * H, N, d] tensor that
// course::fill_normal filled from `seed`, rounded to bf16: the values the timed kernel read.
Eigen::MatrixXd seeded_rows(std::uint64_t seed, const SpeedConfig& c, int head, int first, int rows);

// How far the rows a timed call left (o: kRows x d, row-major; lse: kRows) are from the fp64
// attention of those rows of the check's head, on the check's inputs.
struct TimedRowsError {
  double o = 0;         // max |O - O_fp64| over the finite entries
  double lse = 0;       // max |LSE - LSE_fp64| over the finite entries
  bool finite = true;   // every entry finite
  double limit = 0;     // grading::benchmark_sanity_limit("bf16"), for both
  bool ok() const { return finite && o <= limit && lse <= limit; }
};
TimedRowsError timed_rows_error(const SpeedConfig& c, const SpeedCheck& check, const std::vector<double>& o,
                                const std::vector<float>& lse);

// The failure message of a check whose rows did not match ("your kernel's output on the timed
// shape does not match the reference, so its time does not count: ...").
std::string timed_rows_message(const SpeedCheck& check, const TimedRowsError& e, const std::string& whose);

}  // namespace gpu_grading
