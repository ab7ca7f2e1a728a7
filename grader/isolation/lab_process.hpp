// The trusted side: starts the lab process (see worker.hpp), sends it calls, and reads replies,
// treating every reply as untrusted input.
//
// The lab process runs
//   - inside bubblewrap's namespaces where it works here (user, PID, mount, IPC, network): it sees
//     the system's libraries, its own program and nothing of the course or of other processes;
//   - in its own session and process group, killed with the grader (PR_SET_PDEATHSIG) and
//     killed whole when a call fails;
//   - with resource limits: CPU seconds, address space (CPU labs; COURSE_LAB_MEMORY_MB), private
//     writable memory (GPU labs; COURSE_LAB_GPU_DATA_MB), file size (its log), no core dumps, few
//     open files, a few hundred threads (task_limit.hpp, COURSE_LAB_TASKS), and in the sandbox a
//     /tmp and /dev/shm of COURSE_LAB_TMP_MB each;
//   - as user "nobody" (or COURSE_LAB_UID) when the grader runs as root;
//   - under the system-call filter of seccomp_filter.hpp from its first instruction, installed by
//     the launcher in the sandbox or by the grader's child without one (no new processes, no
//     programs, no signals to others; in CPU labs also no file writes and no network, which GPU
//     labs keep for the CUDA driver), except under a COURSE_LAB_TOOL without namespaces;
//   - with an environment of its own making (PATH, LC_ALL, CUDA_CACHE_DISABLE and the few
//     variables the lab's runtime needs, nothing of the grader's), its own scratch directory as
//     working directory, and only four descriptors: /dev/null, its log (stdout and stderr), the
//     request pipe and the reply pipe.
// Without bubblewrap's namespaces (COURSE_SANDBOX=filter, or where bubblewrap cannot make them:
// inside many containers) Landlock's file rules give the lab process the sandbox's view of the
// files, read-only (file_rules.hpp), where the kernel has Landlock; a GPU lab's filter keeps
// prlimit, sched_set* and setpriority on other processes of its user, and every lab process runs
// as that one user: GPU labs are best graded with the namespaces; their limit on threads is then
// shared (task_limit.hpp).
// A call that crashes, hangs past its time limit, replies nonsense or ends in an error that
// leaves the process unfit (worker.hpp: any exception but course::BadInput and
// course::NotImplemented in a CPU lab; in a GPU lab, one that leaves its CUDA context broken)
// fails that call only: the next call starts a fresh lab process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "wire.hpp"

namespace isolation {

// The folder bound read-only into the lab's sandbox for a tool that runs the lab process
// (COURSE_LAB_TOOL, e.g. compute-sanitizer, which reaches its libraries beside it): the toolkit's
// root, two levels above the tool's real path; "" under /usr, which is bound already. Never a
// folder that holds one of `course` (the grader's own path, which is in the build, and the
// course's source tree, which holds the solutions: a build outside the tree is not beside them):
// then the tool's own folder, or "" if that holds one too.
std::string tool_folder_to_bind(const std::string& tool, const std::vector<std::string>& course);

// The folder of the CUDA runtime that the GPU labs' programs load (COURSE_CUDART_DIR, their run
// path), bound read-only into a GPU lab's sandbox and allowed by its file rules where the system's
// folders do not hold it already: a toolkit under /opt (Arch Linux), on a cluster's shared disk,
// or in a conda environment. "" beneath /usr, /lib and the like, and "" for a folder that holds
// one of `course` or lies within one (the lab would see the course), or that does not exist.
std::string library_folder_to_bind(const std::string& folder, const std::vector<std::string>& course);

// The lab process crashed, exited, hung, or replied something that does not parse.
struct LabFailure : std::runtime_error {
  explicit LabFailure(const std::string& what) : std::runtime_error(what) {}
};

// The lab code threw an exception other than course::BadInput (its message, made safe).
struct LabError : std::runtime_error {
  explicit LabError(const std::string& what) : std::runtime_error(what) {}
};

struct Reply {
  Packet results;
  std::map<std::string, std::uint64_t> counters;  // e.g. "multiplications" (CountedFloat)
};

class LabProcess {
 public:
  // binary: the lab process executable; who: how messages name it ("your lab", "the solution").
  LabProcess(std::string binary, std::string who);
  ~LabProcess();
  LabProcess(const LabProcess&) = delete;
  LabProcess& operator=(const LabProcess&) = delete;

  // Calls `function` with `args` (written after the name) in the lab process. Returns its
  // results; throws course::BadInput if the lab code rejected the input, LabError for any other
  // exception it threw (after which the process is ended if it says it is unfit, unless it runs
  // under a tool), LabFailure if the process died, hung or replied nonsense.
  Reply call(const std::string& function, const Packet& args);

  // Ends the current process: the next call starts a fresh one (e.g. to measure memory).
  void restart();

  // Peak resident memory (VmHWM) of the current process, in bytes; 0 if none is running.
  long peak_rss_bytes() const;
  // CPU time (user + system) of the current process so far, all its threads, in seconds, to the
  // nanosecond (the kernel's clock ticks, usually 10 ms, where its CPU-time clock cannot be
  // read); 0 if none is running. What the kernel measured, so work done on another thread or in
  // another element type counts too.
  double cpu_seconds() const;
  bool available() const;  // the binary exists
  const std::string& binary() const { return binary_; }

  // From the next start on, the lab's program runs under a tool: tool[0] is run with the rest of
  // tool and then the program's path as its arguments (compute-sanitizer and its options), in
  // the same sandbox but without the system-call filter; each call may take call_time_factor
  // times as long. The tool's own output goes to the log, `log_path`.
  void run_under(std::vector<std::string> tool, int call_time_factor, std::string log_path);
  // Ends the current process as grading ends it: its requests pipe is closed and it exits by
  // itself, within `seconds`, or is killed. Returns its exit code, or -1 when it was killed,
  // crashed or was not running.
  int finish(int seconds);
  const std::string& log_path() const { return log_path_; }

 private:
  void start();
  void stop();
  [[noreturn]] void fail(const std::string& function, const std::string& what);
  std::string log_tail() const;
  void note_in_log(const std::string& line) const;

  pid_t lab_pid() const;

  std::string binary_, who_, log_path_, scratch_;
  std::vector<std::string> tool_;  // run_under
  std::string program_copy_dir_;   // the program's copy the tool runs without namespaces, or ""
  int call_time_factor_ = 1;
  pid_t pid_ = -1;              // the grader's child: the lab process, or bubblewrap around it
  mutable pid_t lab_pid_ = -1;  // the lab process itself (found in /proc when namespaced)
  bool namespaced_ = false;     // runs in bubblewrap's namespaces
  bool limited_view_ = false;   // sees the system's folders only (namespaces, or Landlock's rules)
  bool said_how_ = false;       // its log names the sandbox once
  long long output_from_ = 0;   // where the current lab process's own output starts in its log
  int to_lab_ = -1, from_lab_ = -1;
};

// The lab under test: COURSE_WORKER (set by the runner), and the solution, for yardsticks such
// as speed: COURSE_SOLUTION_WORKER.
LabProcess& lab();
LabProcess& solution_lab();

// While it lives, lab() is `stand_in` (the lab's program started another way, e.g. under
// compute-sanitizer), so that the checks' own code calls it unchanged.
class LabStandIn {
 public:
  explicit LabStandIn(LabProcess& stand_in);
  ~LabStandIn();
  LabStandIn(const LabStandIn&) = delete;
  LabStandIn& operator=(const LabStandIn&) = delete;

 private:
  LabProcess* previous_;
};

}  // namespace isolation
