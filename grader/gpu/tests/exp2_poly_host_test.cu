// Host checks of lab 8 step 8's exp2_poly (solutions/lab8_hopper/flash_h100_softmax.cuh, or a
// planted copy's: the include path decides), which compiles for the host as well: against exp2
// in double on a dense grid of [-125, 0] (the range of a score minus the row max, times log2 e),
// at the integers where its two halves meet, and below -125 and at -inf, where it must give 0 as
// ex2.approx does (a row that sees no key keeps l = 0). No GPU needed.
// Prints one line per check and "N passed, M failed"; exit status 1 if any failed.
#include <cmath>
#include <cstdio>

#include "flash_h100_softmax.cuh"

namespace {

int passed = 0, failed = 0;

void expect(bool ok, const char* what, double worst, double at) {
  if (worst > 0)
    std::printf("%s %s (worst %.3g at x = %.6g)\n", ok ? "ok  " : "FAIL", what, worst, at);
  else
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  ok ? ++passed : ++failed;
}

// The largest of some errors, and where it was (a NaN counts as the largest).
struct Worst {
  double err = 0, at = 0;
  void see(double e, double x) {
    if (!(e <= err)) {
      err = e;
      at = x;
    }
  }
};

double relative_error(float x) {
  return std::fabs(double(course::lab8::detail::exp2_poly(x)) / std::exp2(double(x)) - 1.0);
}

}  // namespace

int main() {
  // The polynomial's relative error is 7.5e-5; allow fp32 rounding on top of it.
  constexpr double kLimit = 1e-4;
  Worst grid;
  for (long i = 0; i <= 12500000; ++i) {  // x = 0, -1e-5, ..., -125
    const float x = float(-1e-5 * double(i));
    grid.see(relative_error(x), x);
  }
  expect(grid.err <= kLimit, "relative error within 1e-4 on [-125, 0]", grid.err, grid.at);

  Worst seams;
  for (int j = 0; j >= -125; --j)
    for (float x : {float(j), std::nextafter(float(j), -200.0f), std::nextafter(float(j), 1.0f), j - 0.5f})
      if (x <= 0 && x >= -125) seams.see(relative_error(x), x);
  expect(seams.err <= kLimit, "relative error within 1e-4 at and beside every integer and half", seams.err,
         seams.at);

  Worst below;
  for (float x : {-125.001f, -126.0f, -150.0f, -1e4f, -1e30f, -INFINITY})
    below.see(std::fabs(double(course::lab8::detail::exp2_poly(x))), x);
  expect(below.err == 0.0, "exactly 0 below -125 and at -inf (masked scores)", below.err, below.at);

  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
