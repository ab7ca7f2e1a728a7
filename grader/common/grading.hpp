// The grading harness every lab's grader includes: points per check, skipped checks, seeds,
// and failure messages that say what was compared, in which dtype, shape and seed, against
// which band, and where the worst element is.
//
// A grader is a doctest executable. Each TEST_CASE is one check:
//   TEST_CASE("softmax: fp32 within band" * grading::points(2)) { ... }
//   TEST_CASE("softmax: rows sum to 1" * grading::points(1, "softmax: fp32 within band")) {...}
// The second form names a parent: when the parent fails, this check earns nothing and says
// "parent failed" (as MIT 6.1810's gradelib does), whatever it did itself.
// When COURSE_RESULTS names a file, every check's outcome is written there, one line each, for
// the course runner (grader/runner) to build the scoreboard, results.json and JUnit XML.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "error_stats.hpp"
#include "tolerances.hpp"

namespace grading {

// Test-case decorator carrying the check's points and optional parent check.
doctest::description points(int n, const char* parent = nullptr);

// The run's seed: COURSE_SEED from the environment (the runner sets it from --seed), else 1.
std::uint64_t seed();

// Ends the current check as skipped (e.g. no CUDA device), with the reason shown to the user.
[[noreturn]] void skip(const std::string& reason);

// Gives the current check a share of its points, between 0 and 1 (e.g. a speed check on a
// sliding scale), with a note saying why. A check that also fails an assertion earns nothing.
void award_fraction(double fraction, const std::string& note);

// What a comparison was about, for the failure message.
struct Case {
  std::string what;   // e.g. "softmax_rows" or "attention_forward O"
  std::string dtype;  // "fp64", "fp32", "bf16", "fp16"
  Shape shape;        // the shape of the compared tensor
  std::string inputs; // e.g. "normal inputs" or "block 7, causal"
  std::optional<std::uint64_t> seed = std::nullopt;  // the inputs' seed, if not the run's
  std::string describe() const;  // "softmax_rows, bf16, shape [3, 113], seed 1, normal inputs"
};

// Fails the current check (without stopping it) unless stats.max_abs <= tol.limit and the
// result holds no NaN/Inf where the reference does not. Returns whether it passed.
bool expect_within(const Case& c, const ErrorStats& stats, const Tolerance& tol);

// Fails the current check with `message` (prefixed by the case) unless ok. Returns ok.
bool expect(bool ok, const Case& c, const std::string& message);

// How many failures the current check has recorded so far (assertions, expect, FAIL_CHECK).
int failures_in_this_check();

// Fails the current check with `message` (prefixed by the case), shown before the check's other
// failures: for a cause found after its symptoms were recorded (only the first few are shown).
void fail_first(const Case& c, const std::string& message);

}  // namespace grading
