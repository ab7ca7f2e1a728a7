// What a lab's grading produced: its checks (listed by the trusted grader, never by lab code),
// what happened to each, and why a lab did not run to the end.
#pragma once

#include <string>
#include <vector>

namespace runner {

struct Check {
  std::string name;
  int points = 0;
  std::string parent;
  std::string status = "not run";  // pass | partial | fail | skip | not run
  std::string message;
  std::string figures;  // the comparison closest to its band, when the check passed (--verbose)
  double seconds = 0;
  double credit = 0;    // the share of the points earned, clamped to [0, 1]
  double earned() const;
};

struct LabResult {
  int number = 0;
  std::string name;
  std::vector<Check> checks;
  std::string problem;  // "", or why the lab did not run to the end (crash, timeout, build)
  double seconds = 0;
  double earned() const;
  int possible() const;
  int count(const std::string& status) const;
};

// What the runner hands a grader.
struct GradeRequest {
  std::string grader;           // the trusted grader binary
  std::string worker;           // the lab process binary (student, solution, planted bug, ...)
  std::string solution_worker;  // the solution's lab process (yardsticks such as speed)
  std::string seed = "1";
  double timeout_s = 120;
  std::string work_dir;         // logs and the lab process's scratch folder go here
  // Checks left out, as a doctest name filter ("speed:*"): empty grades every check. For the
  // project's own tests only (a correctness-only pass at many seeds); grading never sets it.
  std::string exclude;
  // Only the checks matching this doctest name filter ("gpu:*"); empty: all. Also for the project's
  // own tests (a GPU variant of a lab whose CPU part it leaves unchanged).
  std::string only;
  // For a GPU lab graded beside others: the lock file through which its checks share the GPU
  // (grader/common/gpu_share.hpp); empty: no lock.
  std::string gpu_lock;
};

// Asks the grader for its checks and their points without running them.
LabResult list_checks(const std::string& grader, const std::string& work_dir, const std::string& exclude = "",
                      const std::string& only = "");

// Lists the checks, runs them, and fills in what happened to every one.
LabResult grade(const GradeRequest& request);

// Every check fails (or is skipped) with `why`: for a lab whose code did not build.
void fail_all(LabResult& lab, const std::string& status, const std::string& why);

}  // namespace runner
