#include "compute_sanitizer.hpp"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>

#include "gpu_harness.hpp"
#include "grading.hpp"
#include "lab_process.hpp"

namespace gpu_grading {

namespace {

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

// Each call may take this many times its usual limit: instrumented kernels are slow.
constexpr int kCallTimeFactor = 20;
// The tool's exit code when it found something (its --error-exitcode).
constexpr int kFoundSomething = 86;
// What compute-sanitizer prints when it could not start the program it was to check.
constexpr const char* kCouldNotLaunch = "Error launching target app";

// What the tool printed that says what it found: its "=========" lines other than the banner and
// the per-run summaries, at most `max_lines` of them, each cut to 300 characters.
std::string reports_in(const std::string& log, int max_lines) {
  std::istringstream lines(log);
  std::string line, out;
  int kept = 0;
  while (kept < max_lines && std::getline(lines, line)) {
    if (line.rfind("=========", 0) != 0) continue;
    if (line.find("COMPUTE-SANITIZER") != std::string::npos) continue;
    if (line.find(" SUMMARY:") != std::string::npos) continue;  // "ERROR SUMMARY: 3 errors" and the like
    const std::size_t start = line.find_first_not_of("= ");
    if (start == std::string::npos) continue;  // a rule of "=" alone
    const std::string text = line.substr(start);
    out += "\n    " + isolation::safe_text(text, 300, false);
    ++kept;
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// What one tool found in one run of `calls`: "" when nothing.
std::string run_tool(const std::string& sanitizer, const std::string& tool,
                     const std::function<void()>& calls) {
  std::string log_path = std::string(std::getenv("COURSE_SCRATCH") ? std::getenv("COURSE_SCRATCH") : "/tmp") +
                         "/compute-sanitizer-XXXXXX";
  const int fd = mkstemp(log_path.data());
  if (fd < 0) grading::skip("could not make a file for compute-sanitizer's report in " + log_path);
  close(fd);
  isolation::LabProcess sanitized(isolation::lab().binary(), "your lab's code under compute-sanitizer " + tool);
  // --report-api-errors no: a CUDA call that fails is the lab's business (its checks report it);
  // the tool is here for what the kernels do.
  sanitized.run_under({sanitizer, "--tool", tool, "--error-exitcode", std::to_string(kFoundSomething),
                       "--report-api-errors", "no", "--print-limit", "20"},
                      kCallTimeFactor, log_path);
  std::exception_ptr failed_call;
  {
    isolation::LabStandIn stand_in(sanitized);
    try {
      calls();
    } catch (...) {
      failed_call = std::current_exception();
    }
  }
  const int code = sanitized.finish(60);
  const std::string log = read_file(log_path);
  unlink(log_path.c_str());
  const std::string found = reports_in(log, 12);
  // The tool never ran the lab's program (it could not start it, or not attach to it): nothing
  // was checked, so the check neither passes nor blames the kernels. It is skipped, earning
  // nothing, and says why: the grading machine needs mending, not the student's code.
  if (code != kFoundSomething && log.find(kCouldNotLaunch) != std::string::npos)
    grading::skip("compute-sanitizer " + tool + " could not start your lab's program on this machine, so " +
                  "nothing was checked (this check earns nothing here, and it is not a finding in your code: " +
                  "ask whoever runs the grader to look at the lab process's log). It said:" + found);
  if (code == kFoundSomething || (code != 0 && !found.empty()))
    return found.empty() ? "(no report in its output)" : found;
  if (failed_call) std::rethrow_exception(failed_call);  // the call's own failure, as usual
  if (code != 0) {
    const std::string tail = log.size() > 600 ? log.substr(log.size() - 600) : log;
    return "compute-sanitizer ended with " +
           (code < 0 ? std::string("a signal, or was killed after 60 s") : "exit code " + std::to_string(code)) +
           "; the end of its output: " + isolation::safe_text(tail, 600, false);
  }
  return "";
}

}  // namespace

namespace {

// Where the CUDA toolkit's files say it is.
std::string search_compute_sanitizer() {
  if (const char* named = std::getenv("COURSE_COMPUTE_SANITIZER")) return executable(named) ? named : "";
#ifdef COURSE_CUDA_BIN_DIR
  if (executable(COURSE_CUDA_BIN_DIR "/compute-sanitizer")) return COURSE_CUDA_BIN_DIR "/compute-sanitizer";
#endif
  if (executable("/usr/local/cuda/bin/compute-sanitizer")) return "/usr/local/cuda/bin/compute-sanitizer";
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');)
    if (executable(dir + "/compute-sanitizer")) return dir + "/compute-sanitizer";
  return "";
}

}  // namespace

std::string find_compute_sanitizer() {
  // Its real path: the sandbox holds /usr but not /etc, and /usr/local/cuda is often a link
  // through /etc/alternatives.
  const std::string found = search_compute_sanitizer();
  char* real = found.empty() ? nullptr : realpath(found.c_str(), nullptr);
  if (!real) return found;
  std::string path = real;
  std::free(real);
  return path;
}

void check_under_compute_sanitizer(const grading::Case& about, const std::function<void()>& calls,
                                   const std::vector<std::string>& tools) {
  require_device();
  const std::string sanitizer = find_compute_sanitizer();
  if (sanitizer.empty())
    grading::skip("compute-sanitizer was not found: it comes with the CUDA toolkit, in its bin/ "
                  "folder (set COURSE_COMPUTE_SANITIZER to its path where it is elsewhere)");
  for (const std::string& tool : tools) {
    const int failures_before = grading::failures_in_this_check();
    const std::string found = run_tool(sanitizer, tool, calls);
    grading::expect(found.empty(), about,
                    "compute-sanitizer's " + tool + " found:" + found +
                        "\n  (run it yourself: compute-sanitizer --tool " + tool +
                        " on a program that calls your kernel; the lab's README says how)");
    // Wrong results under the tool, with nothing reported: the tool runs a block's warps in
    // another order than the GPU does, which is how a race the plain runs hide shows up (seen
    // on the H200: lab 7 part 2 without a barrier at the top of its query loop passes every
    // plain check, and its gradients are wrong under racecheck).
    if (found.empty() && grading::failures_in_this_check() > failures_before) {
      grading::fail_first(about,
                      "wrong results under compute-sanitizer " + tool + " (below), which reported nothing itself: "
                      "under the tool the warps of a block run in another order, so this is most likely a race "
                      "(a missing __syncthreads between writing shared memory and reading it, or before "
                      "overwriting it) that the plain runs happened to hide");
      return;  // the other tools would only repeat it
    }
  }
}

}  // namespace gpu_grading
