// A grader that misbehaves on purpose, to test that the runner contains it. Its behaviour is
// chosen by FAKE_GRADER_MODE: ok, crash, hang, abort, skip, fail, exit; and, as a grader whose
// lab misbehaves, killed_calls, killed_calls_forever (calls killed at their time limit) and
// escapes (a lab process that printed terminal escape sequences).
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "grading.hpp"

namespace {
std::string mode() {
  const char* m = std::getenv("FAKE_GRADER_MODE");
  return m ? m : "ok";
}

// Spends `seconds` as a call killed at its time limit does, and says so on the results pipe as
// isolation::LabProcess::call does (the line isolation::kKilledCallLine in grader/isolation/wire.hpp).
void killed_call(double seconds, const std::string& reported) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const std::string line = "killed_call\t" + reported + "\n";
  if (const char* fd = std::getenv("COURSE_RESULTS_FD")) (void)!write(std::atoi(fd), line.data(), line.size());
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
  // Four calls killed after 1 s each: more than a limit of 3 s, were their seconds counted.
  if (mode() == "killed_calls")
    for (int i = 0; i < 4; ++i) killed_call(1, "1.0");
  // Killed calls for 30 s, ten times the limit (one of them reported as NaN): the runner must stop
  // it at twice its limit. (It ends by itself, so that a runner without that cap fails the test
  // rather than hanging it.)
  if (mode() == "killed_calls_forever")
    for (int i = 0; i < 60; ++i) killed_call(0.5, i == 0 ? "nan" : "0.5");
  // What a lab process prints goes to its log as it is (COURSE_LAB_LOG): escape sequences, a bell,
  // DEL, a carriage return, invalid UTF-8 and an 8-bit CSI (U+009B), among text to keep.
  if (mode() == "escapes")
    if (const char* log = std::getenv("COURSE_LAB_LOG"))
      std::ofstream(log, std::ios::binary | std::ios::app)
          << "\x1b[2J\x1b[31mred\x1b[0m\tbell\x07 del\x7f cr\r bad \xff\xc0\xaf csi \xc2\x9b" "31m \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\n"
          << "\x1b]0;title\x07second line\n";
  if (mode() == "fail") {
    // More symptoms than a message shows, then their cause, which must be shown first.
    for (int i = 1; i <= 5; ++i) FAIL_CHECK("planted failure " << i);
    grading::fail_first({"planted cause", "fp32", {1}, "found last"}, "shown first");
  }
}

TEST_CASE("depends on the misbehaving check" * grading::points(1, "misbehaving check")) { CHECK(true); }

TEST_CASE("last check" * grading::points(4)) { CHECK(true); }

TEST_CASE("half credit" * grading::points(2)) { grading::award_fraction(0.5, "1.8x slower than the solution"); }
