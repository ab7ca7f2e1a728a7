// Running one grader process for the runner: its own process group, a wall-time limit, its
// output to a log, and a pipe (its descriptor 3, named by COURSE_RESULTS_FD) on which it reports
// its checks. Nothing that process or its children leave behind outlives the call: the group is
// killed, and every orphan that was re-parented to the runner (a child subreaper) is killed too.
#pragma once

#include <string>
#include <vector>

namespace runner {

struct ProcessOutcome {
  bool timed_out = false;
  int exit_code = 0;   // when it exited
  int signal = 0;      // when a signal killed it
  double seconds = 0;
  double killed_calls_s = 0;  // seconds of calls killed at their time limit, added to timeout_s
  std::string channel;  // everything the grader wrote to its results pipe
};

// Makes the runner the reaper of every orphaned descendant (Linux PR_SET_CHILD_SUBREAPER).
void become_subreaper();

ProcessOutcome run_grader(const std::vector<std::string>& argv, const std::string& log_path,
                          const std::vector<std::string>& env, double timeout_s);

}  // namespace runner
