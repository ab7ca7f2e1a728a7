// A grader that misbehaves on purpose, to test that the runner contains it. Its behaviour is
// chosen by FAKE_GRADER_MODE: ok, crash, hang, abort, skip, fail, exit.
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "grading.hpp"

namespace {
std::string mode() {
  const char* m = std::getenv("FAKE_GRADER_MODE");
  return m ? m : "ok";
}
}  // namespace

TEST_CASE("first check" * grading::points(2)) { CHECK(1 + 1 == 2); }

TEST_CASE("misbehaving check" * grading::points(3)) {
  if (mode() == "crash") std::raise(SIGSEGV);
  if (mode() == "abort") std::abort();
  if (mode() == "exit") std::exit(3);
  if (mode() == "hang")
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (mode() == "skip") grading::skip("no CUDA device: this machine has no GPU");
  if (mode() == "fail") {
    // More symptoms than a message shows, then their cause, which must be shown first.
    for (int i = 1; i <= 5; ++i) FAIL_CHECK("planted failure " << i);
    grading::fail_first({"planted cause", "fp32", {1}, "found last"}, "shown first");
  }
}

TEST_CASE("depends on the misbehaving check" * grading::points(1, "misbehaving check")) { CHECK(true); }

TEST_CASE("last check" * grading::points(4)) { CHECK(true); }

TEST_CASE("half credit" * grading::points(2)) { grading::award_fraction(0.5, "1.8x slower than the solution"); }
