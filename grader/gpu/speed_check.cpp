#include "speed_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "course/seeded_normal.hpp"
#include "course/softmax_scale.hpp"
#include "reference/reference.hpp"
#include "tolerances.hpp"

namespace gpu_grading {

Eigen::MatrixXd seeded_rows(std::uint64_t seed, const SpeedConfig& c, int head, int first, int rows) {
  Eigen::MatrixXd m(rows, c.d);
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < c.d; ++t) {
      const std::uint64_t i = (std::uint64_t(head) * c.N + first + r) * c.d + t;
      m(r, t) = double(float(Eigen::bfloat16(course::seeded_normal(seed, i))));
    }
  return m;
}

TimedRowsError timed_rows_error(const SpeedConfig& c, const SpeedCheck& check, const std::vector<double>& o,
                                const std::vector<float>& lse) {
  constexpr int kRows = SpeedCheck::kRows;
  // Causal (Nq = Nk = N): row r sees keys 0..r, so the keys up to the last checked row suffice,
  // and the reference's bottom-right mask of kRows queries over those keys is the same mask.
  const int keys = c.causal ? check.first_row + kRows : c.N;
  const Eigen::MatrixXd q = seeded_rows(check.seed, c, check.head, check.first_row, kRows);
  const Eigen::MatrixXd k = seeded_rows(check.seed + 1, c, check.head, 0, keys);
  const Eigen::MatrixXd v = seeded_rows(check.seed + 2, c, check.head, 0, keys);
  const auto ref = reference::attention<double>(q, k, v, course::default_softmax_scale(c.d), c.causal);
  TimedRowsError e;
  e.limit = grading::benchmark_sanity_limit("bf16");
  for (int r = 0; r < kRows; ++r) {
    const double l = lse[std::size_t(r)];
    e.finite = e.finite && std::isfinite(l);
    if (std::isfinite(l)) e.lse = std::max(e.lse, std::fabs(l - ref.lse(r)));
    for (int t = 0; t < c.d; ++t) {
      const double x = o[std::size_t(r) * c.d + t];
      e.finite = e.finite && std::isfinite(x);
      if (std::isfinite(x)) e.o = std::max(e.o, std::fabs(x - ref.O(r, t)));
    }
  }
  return e;
}

std::string timed_rows_message(const SpeedCheck& check, const TimedRowsError& e, const std::string& whose) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "%s output on the timed shape does not match the reference, so its time does not count: "
                "timed call %d of %d, head %d, rows %d..%d (inputs from seed %llu): %smax |O - O_fp64| = %.3g, "
                "max |LSE - LSE_fp64| = %.3g, limit %.3g. A kernel must compute what it is timed on.",
                whose.c_str(), check.checked_call + 1, SpeedCheck::kRepeats, check.head, check.first_row,
                check.first_row + SpeedCheck::kRows - 1, static_cast<unsigned long long>(check.seed),
                e.finite ? "" : "non-finite values, ", e.o, e.lse, e.limit);
  return buf;
}

}  // namespace gpu_grading
